#!/usr/bin/env python3
"""Golden-file oracle: what the real `accelerate launch` gives each worker.

For every case (each accelerate config in ../shared/corpus/accelerate-configs
and in tests/golden/configs) this runs the pinned accelerate release from the
oracle virtual environment, exactly as a user would:

    <venv>/bin/accelerate launch --config_file <cwd>/NAME.yaml \
        [--machine_rank R] [overrides] scripts/oracle_child.py <out>

with a fixed, minimal base environment (PATH, HOME, LANG and nothing else)
in a fresh temporary working directory, lets scripts/oracle_child.py in every
worker dump its environment and argv, and writes one golden file per case to
tests/golden/env/<case>.json.  Multi-machine configs start one launch per
machine rank at the same time, all on 127.0.0.1.

It does not interpret accelerate: values are what the workers saw, with only
the path normalisations listed in tests/golden/README.md, so the goldens are
byte-identical from run to run and from machine to machine (apart from
"physical_cores" and "made_by", which are recorded for that reason).

It must run under the oracle venv's Python (scripts/oracle.sh does that),
which provides PyYAML and psutil and is the interpreter whose accelerate is
being recorded.

usage: oracle.py [--venv DIR] [--timeout S] [--only CASE]...
"""

import argparse
import glob
import importlib.metadata
import ipaddress
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_DIR = os.path.join(os.path.dirname(REPO), "shared", "corpus", "accelerate-configs")
OWN_DIR = os.path.join(REPO, "tests", "golden", "configs")
GOLDEN_DIR = os.path.join(REPO, "tests", "golden", "env")
CHILD = os.path.join(REPO, "scripts", "oracle_child.py")
# Where the child lives relative to each case's cwd, and how it is named on
# the launch command line (so argv[0] is the same on every machine).
CHILD_REL = "scripts/oracle_child.py"

DEFAULT_PORT = 29500
# Seconds a busy port may stay busy before the oracle gives up (a golden made
# while the port is taken would record torchrun's standalone mode instead).
PORT_WAIT_S = 60
# Seconds the other launches of a multi-machine case get after one has failed.
FAIL_GRACE_S = 5

# The last line of a Python traceback: "ValueError: ...", "a.b.CError: ...".
EXC_LINE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*"
                      r"(?:Error|Exception|Exit|Interrupt|Failure)(?::.*)?$")
# tempfile.mkdtemp() suffixes in torchelastic's log directory
# (/tmp/torchelastic_<8>/<run_id>_<8>/attempt_N/R/error.json).
TORCHELASTIC_TMP = re.compile(r"(/torchelastic_)[a-z0-9_]{8}(?=/|$)")
TORCHELASTIC_RUN = re.compile(r"(/torchelastic_XXXXXXXX/[^/]*_)[a-z0-9_]{8}(?=/|$)")

# What _get_mpirun_args() returns for Open MPI (accelerate/utils/launch.py);
# used only by the mpirun fallback when no MPI is installed here.
OPEN_MPI_ARGS = ["mpirun", "--hostfile", "-n", "--npernode", "--bind-to"]

FALLBACK_PROGRAM = r"""
import json, sys
from accelerate.commands.launch import launch_command_parser, _validate_launch_command
import accelerate.utils.launch as L

argv = json.loads(sys.argv[1])
open_mpi = tuple(json.loads(sys.argv[2]))
args = launch_command_parser().parse_args(argv)
args, defaults, mp_from_config = _validate_launch_command(args)
patched = None
if args.mpirun_hostfile is not None:
    try:
        L._get_mpirun_args()
    except OSError as e:
        patched = "%s: %s" % (type(e).__name__, e)
        L._get_mpirun_args = lambda: open_mpi
cmd, env = L.prepare_simple_launcher_cmd_env(args)
print(json.dumps({"cmd": cmd, "env": env, "patched": patched}))
"""


def log(msg):
    print("oracle: " + msg, flush=True)


def versions():
    out = {"python": platform.python_version()}
    for pkg in ("accelerate", "torch", "deepspeed", "torchao"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def port_in_use(port):
    # Same test as accelerate.utils.other.is_port_in_use.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("localhost", port)) == 0


def wait_port_free(port):
    deadline = time.monotonic() + PORT_WAIT_S
    while port_in_use(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def is_local_address(value):
    if not isinstance(value, str):
        return False
    if value == "localhost":
        return True
    try:
        return ipaddress.ip_address(value).is_loopback
    except ValueError:
        return False


def load_yaml(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except Exception:  # the launch itself reports a broken file
        return {}
    return data if isinstance(data, dict) else {}


def as_int(value, default):
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class Normaliser:
    """Replaces the run-specific paths by fixed placeholders."""

    def __init__(self, pairs):
        # Longest first so that a path is never cut by a shorter prefix.
        self.pairs = sorted(pairs, key=lambda p: len(p[0]), reverse=True)

    def __call__(self, value):
        if isinstance(value, str):
            for path, name in self.pairs:
                value = value.replace(path, name)
            value = TORCHELASTIC_TMP.sub(r"\1XXXXXXXX", value)
            value = TORCHELASTIC_RUN.sub(r"\1XXXXXXXX", value)
            return value
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        return value


def last_exception_line(text):
    lines = [l.rstrip() for l in text.splitlines() if l.strip()]
    for line in reversed(lines):
        if EXC_LINE.match(line):
            return line
    return lines[-1] if lines else "(no output)"


def kill_tree(procs):
    """SIGKILL every still-running process in procs (psutil.Process list)."""
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            pass
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    return len(alive)


def sweep(marker):
    """Kills any process whose command line mentions marker (the case's temp dir)."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.pid != me and any(marker in a for a in (p.info["cmdline"] or [])):
                found.append(p)
        except psutil.Error:
            pass
    return kill_tree(found)


def run_launches(cmds, cwd, env, logdir, timeout):
    """Starts every command at once in its own session; returns [(rc|None, stderr)].

    rc None means killed at the timeout.  Every descendant seen while polling
    is killed at the end if still alive, including torchrun workers, which
    run in sessions of their own.
    """
    procs, files, seen = [], [], {}
    for i, cmd in enumerate(cmds):
        out = open(os.path.join(logdir, "launch-%d.out" % i), "wb")
        err = open(os.path.join(logdir, "launch-%d.err" % i), "wb")
        files.append((out, err))
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err, start_new_session=True)
        procs.append(p)
        seen[p.pid] = psutil.Process(p.pid)
    deadline = time.monotonic() + timeout
    failed_at = None
    timed_out = False
    while True:
        for p in procs:
            try:
                for c in psutil.Process(p.pid).children(recursive=True):
                    seen.setdefault(c.pid, c)
            except psutil.Error:
                pass
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        now = time.monotonic()
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        if now > deadline or (failed_at is not None and now - failed_at > FAIL_GRACE_S):
            timed_out = now > deadline
            for p in procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            kill_tree(list(seen.values()))
            for p in procs:
                p.wait()
            break
        time.sleep(0.05)
    kill_tree(list(seen.values()))
    results = []
    for i, p in enumerate(procs):
        for f in files[i]:
            f.close()
        with open(os.path.join(logdir, "launch-%d.err" % i), encoding="utf-8", errors="replace") as f:
            stderr = f.read()
        rc = p.returncode
        if timed_out and rc is not None and rc < 0:
            rc = None
        results.append((rc, stderr))
    return results, timed_out


def read_workers(outdirs):
    """[(machine_rank, record)] for every worker file, in machine-rank order."""
    found = []
    for r, d in enumerate(outdirs):
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(path, encoding="utf-8") as f:
                found.append((r, json.load(f)))
    return found


def torchelastic_dirs():
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "torchelastic_*")))


def remove_torchelastic_dirs(before):
    """Removes the torchelastic_* log directories the case's launches left.

    torchrun makes them with tempfile.mkdtemp() (two per launch, one of them
    unused) and never removes them; the base environment has no TMPDIR, so
    they land in the system temp dir, where the oracle cannot give them a
    private parent.  Removed: directories that appeared during the case and
    hold no regular file (workers that ran cleanly never write error.json),
    so someone else's torchrun logs are left alone.
    """
    for d in sorted(torchelastic_dirs() - before):
        has_file = any(files for _, _, files in os.walk(d))
        if not has_file:
            shutil.rmtree(d, ignore_errors=True)


def worker_entry(machine_rank, record, base_env, norm):
    environ = record["environ"]
    env = {k: v for k, v in environ.items() if base_env.get(k) != v}
    removed = sorted(k for k in base_env if k not in environ)
    node_rank = int(environ["GROUP_RANK"]) if "GROUP_RANK" in environ else machine_rank
    local_rank = int(environ.get("LOCAL_RANK", "0") or "0")
    entry = {
        "node_rank": node_rank,
        "local_rank": local_rank,
        "argv": norm(record["argv"]),
        "env": norm(env),
        "removed": removed,
    }
    if record.get("cmdline") is not None:
        entry["cmdline"] = norm(record["cmdline"])
    return entry


def infer_launcher(workers):
    if not workers:
        return "none"
    envs = [w["env"] for w in workers]
    if any("TORCHELASTIC_RUN_ID" in e for e in envs):
        return "torchrun"
    if any(e.get("ACCELERATE_USE_DEEPSPEED") == "true" for e in envs):
        return "deepspeed"
    return "simple"


def script_interpreter(path):
    """The interpreter in a console script's #! line: accelerate's sys.executable."""
    with open(path, "rb") as f:
        first = f.readline().decode("utf-8", "replace").strip()
    if first.startswith("#!") and len(first.split()) == 1:
        return first[2:]
    return sys.executable


def run_fallback(venv, launch_argv, cwd, env, norm, base_env):
    """accelerate's own prepare_simple_launcher_cmd_env() for a launch that can't run here."""
    py = script_interpreter(os.path.join(venv, "bin", "accelerate"))
    r = subprocess.run([py, "-c", FALLBACK_PROGRAM, json.dumps(launch_argv), json.dumps(OPEN_MPI_ARGS)],
                       cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        return None, last_exception_line(r.stderr)
    data = json.loads(r.stdout.strip().splitlines()[-1])
    cmd = data["cmd"]
    # What the worker would see: argv after the interpreter.
    try:
        i = cmd.index(py)
        child_argv = cmd[i + 1:]
        cmdline = cmd[i:]
    except ValueError:
        child_argv, cmdline = cmd, cmd
    envd = data["env"]
    entry = {
        "node_rank": 0,
        "local_rank": 0,
        "argv": norm(child_argv),
        "cmdline": norm(cmdline),
        "env": norm({k: v for k, v in envd.items() if base_env.get(k) != v}),
        "removed": sorted(k for k in base_env if k not in envd),
    }
    return {"cmd": norm(cmd), "worker": entry, "patched": data["patched"]}, None


def run_case(case, cfg_abs, venv, timeout, keep_logs, made_by, physical_cores):
    tmp = tempfile.mkdtemp(prefix="accelrun-oracle-")
    try:
        return _run_case(case, cfg_abs, venv, timeout, keep_logs, made_by, physical_cores, tmp)
    finally:
        sweep(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def _run_case(case, cfg_abs, venv, timeout, keep_logs, made_by, physical_cores, tmp):
    cwd = os.path.join(tmp, "cwd")
    home = os.path.join(tmp, "home")
    outroot = os.path.join(tmp, "out")
    for d in (cwd, home, outroot, os.path.join(cwd, "scripts")):
        os.makedirs(d, exist_ok=True)
    cfg_copy = os.path.join(cwd, os.path.basename(cfg_abs))
    shutil.copyfile(cfg_abs, cfg_copy)
    shutil.copyfile(CHILD, os.path.join(cwd, CHILD_REL))

    base_env = {"PATH": "%s/bin:/usr/bin:/bin" % venv, "HOME": home, "LANG": "C.UTF-8"}
    cfg = load_yaml(cfg_abs)
    nnodes = as_int(cfg.get("num_machines"), 1)
    nprocs = as_int(cfg.get("num_processes"), None)

    overrides = []
    if nnodes > 1 and cfg.get("main_process_ip") is not None and not is_local_address(cfg.get("main_process_ip")):
        overrides += ["--main_process_ip", "127.0.0.1"]

    port = as_int(cfg.get("main_process_port"), None) or DEFAULT_PORT
    if not wait_port_free(port):
        raise RuntimeError("port %d on localhost stayed in use for %d s; a golden made now would be wrong"
                           % (port, PORT_WAIT_S))

    # mpirun starts the processes of every host itself: launched once, like a user would.
    mpirun = bool((cfg.get("mpirun_config") or {}).get("mpirun_hostfile")) if isinstance(
        cfg.get("mpirun_config"), dict) else False
    nlaunch = 1 if mpirun else max(nnodes, 1)

    accelerate = os.path.join(venv, "bin", "accelerate")
    outdirs, cmds, launch_argvs = [], [], []
    for r in range(nlaunch):
        out = os.path.join(outroot, str(r))
        os.makedirs(out)
        argv = ["--config_file", cfg_copy]
        if nlaunch > 1:
            argv += ["--machine_rank", str(r)]
        argv += overrides + [CHILD_REL, out]
        outdirs.append(out)
        launch_argvs.append(argv)
        cmds.append([accelerate, "launch"] + argv)

    pairs = [(venv, "<venv>"), (cwd, "<cwd>"), (home, "<home>")] + [(d, "<out>") for d in outdirs]
    norm = Normaliser(pairs)

    logdir = os.path.join(REPO, "build", "oracle-logs", case)
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)

    te_before = torchelastic_dirs()
    t0 = time.monotonic()
    results, timed_out = run_launches(cmds, cwd, base_env, logdir, timeout)
    elapsed = time.monotonic() - t0
    remove_torchelastic_dirs(te_before)

    records = read_workers(outdirs)
    workers = [worker_entry(r, rec, base_env, norm) for r, rec in records]
    workers.sort(key=lambda w: (w["node_rank"], w["local_rank"]))

    golden = {
        "case": case,
        "config": os.path.relpath(cfg_abs, REPO),
        "made_by": made_by,
        "base_env": norm(base_env),
        "cli_overrides": overrides,
        "physical_cores": physical_cores,
        "method": "accelerate launch",
        "launch_cmds": [norm(c) for c in cmds],
        "nnodes": nnodes,
    }

    error = None
    if timed_out:
        error = "timeout: no result after %d s" % timeout
    else:
        # A launch that failed by itself (rc > 0) explains the failure better
        # than one killed after FAIL_GRACE_S because another had failed.
        failed = [x for x in results if x[0] not in (0, None) and x[0] > 0] or \
                 [x for x in results if x[0] != 0]
        if failed:
            error = norm(last_exception_line(failed[0][1]))
        if error is None and len({w["node_rank"] for w in workers}) < nlaunch:
            error = "launch exited 0 but some machine rank produced no worker output"

    notes = []
    ds_env = os.path.join(cwd, ".deepspeed_env")
    if os.path.exists(ds_env):
        with open(ds_env, encoding="utf-8", errors="replace") as f:
            golden["deepspeed_env_file"] = norm(f.read().splitlines())
        notes.append("accelerate ran the deepspeed CLI (multi-node launcher other than 'standard') and "
                     "appended the environment it exports to remote nodes to <cwd>/.deepspeed_env, "
                     "recorded in deepspeed_env_file (every launch appends to the same file).")
    if error is not None and mpirun:
        fb, fb_err = run_fallback(venv, launch_argvs[0], cwd, base_env, norm, base_env)
        if fb is not None:
            golden["method"] = "prepare_simple_launcher_cmd_env"
            golden["cmd"] = fb["cmd"]
            workers = [fb["worker"]]
            notes.append("The real launch cannot run here (see error). workers[] is what accelerate's own "
                         "prepare_simple_launcher_cmd_env() returns for the same arguments and config, called "
                         "in the venv with the same base environment and cwd; cmd is the mpirun command it "
                         "would execute, and every MPI rank would get this environment plus the OMPI_*/PMI_* "
                         "variables mpirun adds.")
            if fb["patched"]:
                notes.append("No MPI is installed on the oracle machine, so _get_mpirun_args() was replaced "
                             "by what it returns for Open MPI: %s." % json.dumps(OPEN_MPI_ARGS))
        else:
            notes.append("fallback prepare_simple_launcher_cmd_env() failed too: %s" % fb_err)

    launcher = infer_launcher(workers)
    if golden["method"] != "accelerate launch":
        launcher = "simple"
    per_node = {}
    for w in workers:
        per_node[w["node_rank"]] = per_node.get(w["node_rank"], 0) + 1
    if golden["method"] == "prepare_simple_launcher_cmd_env" and nprocs:
        nproc_per_node = nprocs // max(nnodes, 1)
    elif per_node:
        nproc_per_node = max(per_node.values())
    elif nprocs is not None and nprocs > 0:
        nproc_per_node = nprocs // max(nnodes, 1)
    else:
        nproc_per_node = None
    golden["launcher"] = launcher
    golden["nproc_per_node"] = nproc_per_node
    golden["result"] = "ok" if error is None else "error"
    if error is not None:
        golden["error"] = error
    if overrides:
        notes.append("main_process_ip %r is not a local address; every machine rank was launched on "
                     "127.0.0.1 with %s." % (cfg.get("main_process_ip"), " ".join(overrides)))
    if launcher == "simple" and nnodes > 1 and golden["method"] == "accelerate launch":
        notes.append("The simple launcher starts one process per machine and sets no GROUP_RANK; node_rank "
                     "is the --machine_rank of the launch that started the worker.")
    if notes:
        golden["note"] = " ".join(notes)
    golden["workers"] = workers

    if not keep_logs and error is None:
        shutil.rmtree(logdir, ignore_errors=True)
    return golden, elapsed


def collect_cases():
    cases = []
    corpus = sorted(glob.glob(os.path.join(CORPUS_DIR, "*.yaml")))
    if not corpus:
        log("warning: no corpus at %s (expected ../shared beside the checkout); its cases are skipped"
            % os.path.relpath(CORPUS_DIR, REPO))
    own = sorted(glob.glob(os.path.join(OWN_DIR, "*.yaml")))
    names = {}
    for path in corpus + own:
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem in names:
            raise SystemExit("oracle: case name %s is used by %s and %s" % (stem, names[stem], path))
        names[stem] = path
        cases.append((stem, path))
    return cases, bool(corpus)


def write_golden(golden):
    path = os.path.join(GOLDEN_DIR, golden["case"] + ".json")
    text = json.dumps(golden, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    old = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    if old != text:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    return old is None, old is not None and old != text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--venv", default=os.path.join(REPO, "build", "oracle-venv"))
    ap.add_argument("--timeout", type=int, default=90, help="seconds per case (default 90)")
    ap.add_argument("--only", action="append", default=[], help="run only this case (repeatable)")
    ap.add_argument("--keep-logs", action="store_true", help="keep build/oracle-logs/<case> for ok cases too")
    opts = ap.parse_args()

    venv = os.path.abspath(opts.venv)
    if not os.path.isfile(os.path.join(venv, "bin", "accelerate")):
        raise SystemExit("oracle: no accelerate in %s; run scripts/oracle.sh" % venv)
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        raise SystemExit("oracle: run me with %s/bin/python (scripts/oracle.sh does)" % venv)

    made_by = versions()
    physical_cores = psutil.cpu_count(logical=False)
    cases, have_corpus = collect_cases()
    if opts.only:
        wanted = set(opts.only)
        unknown = wanted - {c for c, _ in cases}
        if unknown:
            raise SystemExit("oracle: unknown case(s): %s" % ", ".join(sorted(unknown)))
        cases = [c for c in cases if c[0] in wanted]

    os.makedirs(GOLDEN_DIR, exist_ok=True)
    log("accelerate %s, torch %s, deepspeed %s, torchao %s, python %s; %s physical cores; %d cases"
        % (made_by["accelerate"], made_by["torch"], made_by["deepspeed"], made_by["torchao"],
           made_by["python"], physical_cores, len(cases)))
    t_all = time.monotonic()
    counts = {"ok": 0, "error": 0}
    changed = 0
    for case, path in cases:
        golden, elapsed = run_case(case, path, venv, opts.timeout, opts.keep_logs, made_by, physical_cores)
        new, diff = write_golden(golden)
        changed += int(new or diff)
        counts[golden["result"]] += 1
        extra = ""
        if golden["result"] == "error":
            extra = ": " + golden["error"][:150]
        log("%-45s %-5s %-8s %2d worker(s) %5.1f s%s%s" % (
            case, golden["result"], golden["launcher"], len(golden["workers"]), elapsed,
            " [new]" if new else (" [changed]" if diff else ""), extra))

    if not opts.only and have_corpus and os.path.isdir(OWN_DIR):
        keep = {c for c, _ in cases}
        for path in sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.json"))):
            if os.path.splitext(os.path.basename(path))[0] not in keep:
                log("removing stale %s" % os.path.relpath(path, REPO))
                os.unlink(path)
                changed += 1
    log("%d cases: %d ok, %d error; %d golden file(s) new or changed; %.1f s"
        % (len(cases), counts["ok"], counts["error"], changed, time.monotonic() - t_all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
