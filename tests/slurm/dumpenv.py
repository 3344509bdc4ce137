#!/usr/bin/python3
"""Run by every Slurm task in tests/slurm/run.sh: writes the task's whole
environment to DIR/<step id>.<rank>.json (atomically) for check.py."""
import json
import os
import sys

d = sys.argv[1]
e = dict(os.environ)
name = os.path.join(d, "%s.%s.json" % (e.get("SLURM_STEP_ID", "x"), e.get("SLURM_PROCID", "x")))
with open(name + ".tmp", "w") as f:
    json.dump(e, f, sort_keys=True)
os.rename(name + ".tmp", name)
