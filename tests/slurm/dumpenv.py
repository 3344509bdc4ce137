#!/usr/bin/python3
"""Run by every Slurm task in tests/slurm/run.sh: writes the task's whole
environment to DIR/<step id>.<rank>.json (atomically) for check.py, with
the CPUs it may run on as "__cpus__" (a list such as "0-1")."""
import json
import os
import sys

d = sys.argv[1]
e = dict(os.environ)


def cpulist(cpus):
    out, run = [], []
    for c in sorted(cpus) + [None]:
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [c] if c is not None else []
    return ",".join(out)


e["__cpus__"] = cpulist(os.sched_getaffinity(0))
name = os.path.join(d, "%s.%s.json" % (e.get("SLURM_STEP_ID", "x"), e.get("SLURM_PROCID", "x")))
with open(name + ".tmp", "w") as f:
    json.dump(e, f, sort_keys=True)
os.rename(name + ".tmp", name)
