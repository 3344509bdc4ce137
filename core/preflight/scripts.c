/*
 * scripts.c: the Python program the preflight runs in the job's Python,
 *
 *   python -c PROBE ROUNDS [MODULE...]
 *
 * It writes two JSON lines to fd 3 (what the program itself prints on
 * stdout or stderr, a warning say, cannot mix into them) and leaves with
 * os._exit, so no library's exit handler can hang it.  One process, so a
 * node pays for importing torch once.
 *
 * Line 1, as soon as it is known (a hang later loses nothing of it):
 *   {"python", "executable", "packages": {name: version or null},
 *    "imports": [{"what", "error" or null, "seconds"}],
 *    "torch_cuda", "torch_nccl", "torch_error"}
 *   Versions come from the installed distributions' metadata (no import);
 *   then, in this clean process: `from accelerate import Accelerator;
 *   import accelerate.big_modeling`, transformers, peft (when installed),
 *   the extra modules; last torch's CUDA and NCCL.
 *
 * Line 2: {"modules": [...], "rounds": N, "concurrent_only": {module: error},
 *          "skipped": [package]}
 *   The extra modules' packages and accelerate (not those with compiled
 *   modules loaded, such as torch: they cannot be imported twice in one
 *   process; "skipped" names them), each with its direct
 *   submodules (not tests, commands or private ones), forgotten (torch stays
 *   loaded) and imported again from one thread per module, released by a
 *   barrier: the package's thread imports it, the others their submodule as
 *   soon as the package's import has begun (as a program's second thread
 *   does while its first is still in `import accelerate`: Python then runs
 *   the submodule at once, not after the package's __init__, and a cycle
 *   the __init__'s order hid shows).  ROUNDS times: all at once, then the
 *   submodules one after another 2 ms apart in their order, then in the
 *   reverse order: two modules that import each other pass or fail at once
 *   by which one the import lock lets go first, and the staggered rounds try
 *   both firsts.  Then, forgotten once more, the modules that failed are
 *   imported from this one thread: only those that import so but not beside
 *   the others are reported (one that fails alone is the import test's).
 */
#include "pf_int.h"

const char pf__probe_py[] =
    /* the versions and the clean import test: the first line */
    "import importlib, importlib.util, json, os, pkgutil, sys, threading, time\n"
    "out = os.fdopen(3, 'w')\n"
    "r = {'python': '%d.%d.%d' % tuple(sys.version_info[:3]), 'executable': sys.executable,\n"
    "     'packages': {}, 'imports': []}\n"
    "try:\n"
    "    from importlib import metadata\n"
    "except ImportError:\n"
    "    metadata = None\n"
    "for p in ('torch', 'accelerate', 'transformers', 'peft', 'deepspeed'):\n"
    "    try:\n"
    "        r['packages'][p] = metadata.version(p)\n"
    "    except Exception:\n"
    "        r['packages'][p] = None\n"
    "def attempt(what, names):\n"
    "    import importlib\n"
    "    t = time.monotonic()\n"
    "    e = None\n"
    "    try:\n"
    "        for n in names:\n"
    "            m = importlib.import_module(n[0])\n"
    "            for a in n[1:]:\n"
    "                getattr(m, a)\n"
    "    except BaseException as x:\n"
    "        e = '%s: %s' % (type(x).__name__, x)\n"
    "    r['imports'].append({'what': what, 'error': e, 'seconds': round(time.monotonic() - t, "
    "3)})\n"
    "pk = r['packages']\n"
    "if pk['accelerate']:\n"
    "    attempt('from accelerate import Accelerator; import accelerate.big_modeling',\n"
    "            [('accelerate', 'Accelerator'), ('accelerate.big_modeling',)])\n"
    "for p in ('transformers', 'peft'):\n"
    "    if pk[p]:\n"
    "        attempt('import ' + p, [(p,)])\n"
    "rounds, extra = int(sys.argv[1]), sys.argv[2:]\n"
    "for m in extra:\n"
    "    attempt('import ' + m, [(m,)])\n"
    "if pk['torch']:\n"
    "    try:\n"
    "        import torch\n"
    "        r['torch_cuda'] = torch.version.cuda\n"
    "        try:\n"
    "            v = torch.cuda.nccl.version()\n"
    "            r['torch_nccl'] = '.'.join(map(str, v)) if isinstance(v, tuple) else str(v)\n"
    "        except BaseException:\n"
    "            pass\n"
    "    except BaseException as x:\n"
    "        r['torch_error'] = '%s: %s' % (type(x).__name__, x)\n"
    "out.write(json.dumps(r) + '\\n')\n"
    "out.flush()\n"
    /* the threaded import, after it: the second line */
    "pkgs, skipped = [], []\n"
    "def native(p):\n"
    "    # a package with compiled modules loaded cannot be imported twice in one\n"
    "    # process (torch, numpy): it is left out of the threaded rounds\n"
    "    for k, m in list(sys.modules.items()):\n"
    "        if k == p or k.startswith(p + '.'):\n"
    "            f = getattr(m, '__file__', None) or ''\n"
    "            if f.endswith(('.so', '.pyd')):\n"
    "                return True\n"
    "    return False\n"
    "for m in extra + ['accelerate']:\n"
    "    p = m.split('.')[0]\n"
    "    if p in pkgs or p in skipped:\n"
    "        continue\n"
    "    (skipped if native(p) else pkgs).append(p)\n"
    "mods = []\n"
    "for p in pkgs:\n"
    "    try:\n"
    "        spec = importlib.util.find_spec(p)\n"
    "    except Exception:\n"
    "        spec = None\n"
    "    if spec is None:\n"
    "        continue\n"
    "    subs = []\n"
    "    if spec.submodule_search_locations:\n"
    "        subs = sorted(p + '.' + m.name for m in\n"
    "                      pkgutil.iter_modules(spec.submodule_search_locations)\n"
    "                      if not m.name.startswith(('_', 'test', 'commands')))\n"
    "    mods += [p] + subs[:31]\n"
    "def forget():\n"
    "    for k in list(sys.modules):\n"
    "        if any(k == p or k.startswith(p + '.') for p in pkgs):\n"
    "            del sys.modules[k]\n"
    "def together(order):\n"
    "    errs = {}\n"
    "    gate = threading.Barrier(len(mods))\n"
    "    def one(m, delay):\n"
    "        top = m.split('.')[0]\n"
    "        try:\n"
    "            gate.wait(30)\n"
    "        except threading.BrokenBarrierError:\n"
    "            pass\n"
    "        if m != top:\n"
    "            t = time.monotonic() + 5\n"
    "            while top not in sys.modules and time.monotonic() < t:\n"
    "                time.sleep(0.0005)\n"
    "            time.sleep(delay)\n"
    "        try:\n"
    "            importlib.import_module(m)\n"
    "        except BaseException as x:\n"
    "            errs[m] = '%s: %s' % (type(x).__name__, x)\n"
    "    subs = [m for m in (order or []) if '.' in m]\n"
    "    ts = [threading.Thread(target=one, args=(m, subs.index(m) * 0.002 if m in subs else 0),\n"
    "                           daemon=True) for m in mods]\n"
    "    for t in ts:\n"
    "        t.start()\n"
    "    for t in ts:\n"
    "        t.join()\n"
    "    return errs\n"
    "found, done = {}, 0\n"
    "for i in range(rounds if mods else 0):\n"
    "    forget()\n"
    "    for m, e in together(None if i == 0 else mods if i % 2 else mods[::-1]).items():\n"
    "        found.setdefault(m, e)\n"
    "    done += 1\n"
    "forget()\n"
    "for m in [m for m in mods if m in found]:\n"
    "    try:\n"
    "        importlib.import_module(m)\n"
    "    except BaseException:\n"
    "        del found[m]\n"
    "found = {m: found[m] for m in mods if m in found}\n"
    "out.write(json.dumps({'modules': mods, 'rounds': done, 'concurrent_only': found,\n"
    "                      'skipped': skipped}) + '\\n')\n"
    "out.close()\n"
    "os._exit(0)\n";
