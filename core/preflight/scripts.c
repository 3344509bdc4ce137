/*
 * scripts.c: the two Python programs the preflight runs in the job's Python.
 * Each writes one JSON object to fd 3 (what the program itself prints on
 * stdout or stderr, a warning say, cannot mix into it) and leaves with
 * os._exit, so no library's exit handler can hang it.
 *
 * probe:   python -c PROBE [MODULE...]
 *   {"python", "executable", "packages": {name: version or null},
 *    "imports": [{"what", "error" or null, "seconds"}],
 *    "torch_cuda", "torch_nccl", "torch_error"}
 *   Versions come from the installed distributions' metadata (no import);
 *   then, in this clean process: `from accelerate import Accelerator;
 *   import accelerate.big_modeling`, transformers, peft (when installed),
 *   the extra modules; last torch's CUDA and NCCL.
 *
 * threads: python -c THREADS ROUNDS PACKAGE...
 *   {"modules": [...], "rounds": N, "concurrent_only": {module: error}}
 *   Each package and its direct submodules (not tests, commands or private
 *   ones), one thread each, released together by a barrier: the package's
 *   thread imports it, the others their submodule as soon as the package's
 *   import has begun (as a program's second thread does while its first is
 *   still in `import accelerate`: Python then runs the submodule at once,
 *   not after the package's __init__, and a cycle the __init__'s order hid
 *   shows).  ROUNDS times, the packages' modules forgotten between rounds
 *   (torch stays, so later rounds are quick): all at once, then the
 *   submodules one after another 2 ms apart (once the package's import has
 *   begun) in their order, then in the reverse order: two modules that
 *   import each other pass or fail at once by which one the import lock
 *   lets go first, and the staggered rounds try both firsts.  A module that
 *   failed is imported again alone, from scratch: only a module that imports
 *   alone but not beside the others is reported (one that fails alone is
 *   the import test's to report).
 */
#include "pf_int.h"

const char pf__probe_py[] =
    "import json, os, sys, time\n"
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
    "for m in sys.argv[1:]:\n"
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
    "json.dump(r, out)\n"
    "out.close()\n"
    "os._exit(0)\n";

const char pf__threads_py[] =
    "import importlib, importlib.util, json, os, pkgutil, sys, threading, time\n"
    "out = os.fdopen(3, 'w')\n"
    "rounds, pkgs = int(sys.argv[1]), sys.argv[2:]\n"
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
    "    errs = together(None if i == 0 else mods if i % 2 else mods[::-1])\n"
    "    done += 1\n"
    "    for m in [m for m in mods if m in errs]:\n"
    "        if m in found:\n"
    "            continue\n"
    "        forget()\n"
    "        try:\n"
    "            importlib.import_module(m)\n"
    "            found[m] = errs[m]\n"
    "        except BaseException:\n"
    "            pass\n"
    "json.dump({'modules': mods, 'rounds': done, 'concurrent_only': found}, out)\n"
    "out.close()\n"
    "os._exit(0)\n";
