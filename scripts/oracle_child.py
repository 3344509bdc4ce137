"""The worker program that `accelerate launch` starts for the golden oracle.

It records exactly what it was given and nothing else: its environment, its
sys.argv and its real command line (/proc/self/cmdline, which shows the
interpreter flags such as torchrun's `python -u`).  It imports only the
standard library, so it starts fast and cannot change its own environment.

usage: python oracle_child.py OUTDIR

Writes OUTDIR/<node_rank>-<local_rank>.json, where node_rank is GROUP_RANK
(set by torchrun) or 0, and local_rank is LOCAL_RANK or 0:

    {"argv": [...], "cmdline": [...], "environ": {NAME: VALUE, ...}}

The file is written under a temporary name and renamed, so a reader never
sees half a file.  Two workers that map to the same name (which only happens
when neither torchrun nor MPI gave a rank) make the second one fail loudly
instead of overwriting the first.
"""

import json
import os
import sys


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: oracle_child.py OUTDIR\n")
        return 2
    outdir = sys.argv[1]
    environ = dict(os.environ)
    node_rank = int(environ.get("GROUP_RANK", "0") or "0")
    local_rank = int(environ.get("LOCAL_RANK", "0") or "0")
    try:
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read()
        cmdline = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]]
    except OSError:
        cmdline = None
    record = {"argv": list(sys.argv), "cmdline": cmdline, "environ": environ}
    name = os.path.join(outdir, "%d-%d.json" % (node_rank, local_rank))
    tmp = name + ".tmp.%d" % os.getpid()
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True))
        f.write("\n")
    # link() fails if the name exists: never overwrite another worker's file.
    os.link(tmp, name)
    os.unlink(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
