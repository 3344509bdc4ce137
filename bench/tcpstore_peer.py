#!/usr/bin/env python3
"""bench/tcpstore_peer.py: the peer of bench/rendezvous.c on PyTorch's TCPStore.

The same workload: N clients, each a TCPStore connection of its own, connect,
set a key of their own, get another client's key, pass one barrier of all N
(TCPStore has none: add 1 to a counter, the client that brings it to N sets
a "done" key, every client waits for it, as torch.distributed's store-based
barrier does).  The master TCPStore lives in this process, as on rank 0; the
clients are spread over PROCS processes.

    tcpstore_peer.py run N [PROCS]
    tcpstore_peer.py client PORT FIRST COUNT N      (run starts these)

A client process handles its clients phase by phase (all connect, then all
set, ...), since a TCPStore call blocks and Python threads would only queue
on the interpreter lock; the waits of the last phase cannot deadlock because
every add is sent before any wait.  Timing as in rendezvous.c: processes
import torch and say "ready" first; t0 is when all are told "go"; a phase's
figure is t0 to the last client through it (time.monotonic, shared by the
processes of a machine).  Output, one line:

    tcpstore N=1024 procs=8 connect=... set=... get=... barrier=... s
"""
import datetime
import os
import subprocess
import sys
import time

TIMEOUT = datetime.timedelta(seconds=900)


def client(port, first, count, n):
    from torch.distributed import TCPStore

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.read(1)
    t = []
    stores = [
        TCPStore("127.0.0.1", port, None, False, TIMEOUT) for _ in range(count)
    ]
    t.append(time.monotonic())
    for i, s in enumerate(stores):
        s.set("k/%d" % (first + i), "addr-of-%d" % (first + i))
    t.append(time.monotonic())
    for i, s in enumerate(stores):
        s.get("k/%d" % ((first + i + 1) % n))
    t.append(time.monotonic())
    for s in stores:
        if s.add("barrier", 1) == n:
            s.set("barrier/done", "1")
    for s in stores:
        s.wait(["barrier/done"])
    t.append(time.monotonic())
    sys.stdout.write("done %s\n" % " ".join("%.6f" % x for x in t))
    sys.stdout.flush()
    return 0


def run(n, procs):
    from torch.distributed import TCPStore

    master = TCPStore("127.0.0.1", 0, None, True, TIMEOUT, wait_for_workers=False)
    port = master.port
    kids = []
    first = 0
    for p in range(procs):
        count = n // procs + (1 if p < n % procs else 0)
        kids.append(
            subprocess.Popen(
                [sys.executable, __file__, "client", str(port), str(first), str(count), str(n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        first += count
    for k in kids:
        if k.stdout.readline() != "ready\n":
            print("tcpstore_peer: a client process did not start", file=sys.stderr)
            return 1
    t0 = time.monotonic()
    for k in kids:
        k.stdin.write("g")
        k.stdin.flush()
    phases = [0.0] * 4
    failed = 0
    for k in kids:
        line = k.stdout.readline().split()
        if len(line) != 5 or line[0] != "done":
            failed += 1
        else:
            phases = [max(a, float(b) - t0) for a, b in zip(phases, line[1:])]
        k.wait()
    if failed:
        print("tcpstore N=%d procs=%d FAILED (%d processes)" % (n, procs, failed))
        return 1
    print(
        "tcpstore N=%d procs=%d connect=%.3f set=%.3f get=%.3f barrier=%.3f s"
        % (n, procs, *phases)
    )
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "run":
        return run(int(argv[2]), int(argv[3]) if len(argv) > 3 else 8)
    if len(argv) == 6 and argv[1] == "client":
        return client(int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
