#!/usr/bin/python3
"""Checks for tests/slurm/run.sh on the environments Slurm tasks dumped.

Each task ran tests/slurm/dumpenv.py, which wrote DIR/<step>.<rank>.json (its
whole environment).  Every subcommand prints what is wrong, one line each,
and exits 1 when something is; 0 and nothing (or a short summary) when all
is right.

  contract DIR CLI CFG --tasks N --nproc-per-node P [--site FILE] [--master-addr A]
           [--node-rank-from nodeid|group]
      every variable `accelrun env CFG ... --format json` prints for the task's
      node rank / local rank / MASTER_PORT equals the task's value; the node rank
      is SLURM_NODEID (default; then also RANK = SLURM_PROCID) or, with
      --node-rank-from group, the task's GROUP_RANK (the plugin's topology order)
  order DIR --tasks N --nproc-per-node P --nodes n1,n3,n2,n4 [--master-addr A]
      GROUP_RANK is the node's index in --nodes on every task of that node,
      RANK = P*GROUP_RANK + LOCAL_RANK, LOCAL_RANK = SLURM_LOCALID, WORLD_SIZE=N,
      GROUP_WORLD_SIZE = number of nodes, MASTER_ADDR=A (default: the first node)
  vars DIR --tasks N [--eq NAME=VALUE]... [--unset NAME]... [--unset-prefix P]...
  untouched DIR --tasks N      none of the variables the plugin sets (RANK, MASTER_*,
                               ACCELERATE_*, FSDP_*, PET_*, CUDA_DEVICE_ORDER, ...)
  layout DIR --world W         ranks 0..W-1 once each, WORLD_SIZE=W, LOCAL_WORLD_SIZE
                               and LOCAL_RANK consistent with the node the task ran on
  gpus DIR --tasks N           CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA_VISIBLE_DEVICES one of
                               the GPUs Slurm granted the task, distinct on a node
  perm DIR --tasks N [--want LIST]
                               CUDA_DEVICE_ORDER=PCI_BUS_ID; every task of a node has the
                               same CUDA_VISIBLE_DEVICES, a permutation of its SLURM_STEP_GPUS;
                               with --want, exactly LIST on every task
  ports DIR1 DIR2 --base B --range R
                               one MASTER_PORT per step, different, in [B, B+R)
  batch FILE                   the batch script's own line shows no RANK/WORLD_SIZE
"""
import argparse
import glob
import json
import os
import subprocess
import sys

# variables the plugin must leave alone when --accel-config is not used
CONTRACT_NAMES = [
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "CUDA_DEVICE_ORDER", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
]
CONTRACT_PREFIXES = ["ACCELERATE_", "FSDP_", "PET_"]

problems = []


def bad(msg):
    problems.append(msg)


def load(d):
    tasks = []
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(f) as fh:
            e = json.load(fh)
        e["__file"] = os.path.basename(f)
        tasks.append(e)
    return tasks


def tag(e):
    return "task %s on %s (step %s)" % (e.get("SLURM_PROCID", "?"), e.get("SLURMD_NODENAME", "?"),
                                         e.get("SLURM_STEP_ID", "?"))


def want_tasks(tasks, n, d):
    if len(tasks) != n:
        bad("%s: %d task dumps, want %d" % (d, len(tasks), n))
        return False
    return True


def cmd_contract(a):
    tasks = load(a.dir)
    if not want_tasks(tasks, a.tasks, a.dir):
        return
    nnodes = len({e.get("SLURMD_NODENAME") for e in tasks})
    compared = 0
    for e in tasks:
        port = e.get("MASTER_PORT")
        if port is None:
            bad("%s: no MASTER_PORT" % tag(e))
            continue
        node_rank = e["SLURM_NODEID"] if a.node_rank_from == "nodeid" else e.get("GROUP_RANK")
        if node_rank is None:
            bad("%s: no GROUP_RANK" % tag(e))
            continue
        cmd = [a.cli, "env", a.cfg, "--nnodes", str(nnodes), "--node-rank", node_rank,
               "--nproc-per-node", str(a.nproc_per_node), "--local-rank", e["SLURM_LOCALID"],
               "--master-addr", a.master_addr, "--master-port", port, "--format", "json"]
        if a.site:
            cmd += ["--site", a.site]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            bad("%s: %s exited %d: %s" % (tag(e), " ".join(cmd), r.returncode, r.stderr.strip()))
            continue
        want = json.loads(r.stdout)
        for k, v in sorted(want.items()):
            got = e.get(k)
            if got != v:
                bad("%s: %s=%r, accelrun env says %r" % (tag(e), k, got, v))
        compared += len(want)
        if a.node_rank_from == "nodeid" and e.get("RANK") != e.get("SLURM_PROCID"):
            bad("%s: RANK=%r but SLURM_PROCID=%r" % (tag(e), e.get("RANK"), e.get("SLURM_PROCID")))
    ranks = sorted(e.get("RANK", "?") for e in tasks)
    if ranks != [str(i) for i in range(a.tasks)]:
        bad("%s: ranks %s, want 0..%d once each" % (a.dir, ranks, a.tasks - 1))
    if not problems:
        print("# %d tasks, %d variables compared with accelrun env" % (len(tasks), compared))


def cmd_order(a):
    tasks = load(a.dir)
    if not want_tasks(tasks, a.tasks, a.dir):
        return
    nodes = a.nodes.split(",")
    master = a.master_addr or nodes[0]
    seen = {}
    for e in tasks:
        node = e.get("SLURMD_NODENAME")
        if node not in nodes:
            bad("%s: ran on %r, not one of %s" % (tag(e), node, nodes))
            continue
        gr = nodes.index(node)
        seen.setdefault(node, []).append(e)
        want = {
            "GROUP_RANK": str(gr),
            "GROUP_WORLD_SIZE": str(len(nodes)),
            "LOCAL_RANK": e.get("SLURM_LOCALID"),
            "WORLD_SIZE": str(a.tasks),
            "MASTER_ADDR": master,
        }
        try:
            want["RANK"] = str(a.nproc_per_node * gr + int(e.get("LOCAL_RANK", "")))
        except ValueError:
            bad("%s: LOCAL_RANK=%r is not a number" % (tag(e), e.get("LOCAL_RANK")))
        for k, v in want.items():
            if e.get(k) != v:
                bad("%s: %s=%r, want %r" % (tag(e), k, e.get(k), v))
    for node in nodes:
        if len(seen.get(node, [])) != a.nproc_per_node:
            bad("%s: %d tasks, want %d" % (node, len(seen.get(node, [])), a.nproc_per_node))
    ranks = sorted(int(e["RANK"]) for e in tasks if e.get("RANK", "").isdigit())
    if ranks != list(range(a.tasks)):
        bad("%s: ranks %s, want 0..%d once each" % (a.dir, ranks, a.tasks - 1))
    if not problems:
        print("# GROUP_RANK by node: %s; RANK by node: %s" % (
            ", ".join("%s=%s" % (n, seen[n][0]["GROUP_RANK"]) for n in nodes),
            ", ".join("%s=%s" % (n, ",".join(sorted((e["RANK"] for e in seen[n]), key=int)))
                      for n in nodes)))


def cmd_vars(a):
    tasks = load(a.dir)
    if not want_tasks(tasks, a.tasks, a.dir):
        return
    for e in tasks:
        for kv in a.eq or []:
            k, v = kv.split("=", 1)
            if e.get(k) != v:
                bad("%s: %s=%r, want %r" % (tag(e), k, e.get(k), v))
        for k in a.unset or []:
            if k in e:
                bad("%s: %s=%r is set, want it unset" % (tag(e), k, e[k]))
        if a.cpus is not None and e.get("__cpus__") != a.cpus:
            bad("%s: runs on CPUs %r, want %r" % (tag(e), e.get("__cpus__"), a.cpus))
        for p in a.unset_prefix or []:
            for k in sorted(e):
                if k.startswith(p):
                    bad("%s: %s=%r is set, want no %s* variable" % (tag(e), k, e[k], p))


def cmd_nic(a):
    """Each task's NCCL_IB_HCA is the HCA of the GPU it uses: entry
    LOCAL_RANK mod n of its CUDA_VISIBLE_DEVICES, as accelerate picks it."""
    tasks = load(a.dir)
    if not want_tasks(tasks, a.tasks, a.dir):
        return
    hca = dict(kv.split("=", 1) for kv in a.map.split(","))
    seen = []
    for e in tasks:
        gpus = e.get("CUDA_VISIBLE_DEVICES", "").split(",")
        gpu = gpus[int(e.get("LOCAL_RANK", 0)) % len(gpus)]
        want = "=" + hca.get(gpu, "?")
        if e.get("NCCL_IB_HCA") != want:
            bad("%s: GPU %s, NCCL_IB_HCA=%r, want %r" % (tag(e), gpu, e.get("NCCL_IB_HCA"), want))
        seen.append("%s:%s" % (gpu, e.get("NCCL_IB_HCA")))
    if not problems:
        print("# GPU:NCCL_IB_HCA per task: %s" % " ".join(sorted(seen)))


def cmd_layout(a):
    tasks = load(a.dir)
    if not want_tasks(tasks, a.world, a.dir):
        return
    ranks = sorted(int(e.get("RANK", -1)) for e in tasks)
    if ranks != list(range(a.world)):
        bad("ranks %s, want 0..%d once each" % (ranks, a.world - 1))
    per_node = {}
    for e in tasks:
        per_node.setdefault(e.get("SLURMD_NODENAME"), []).append(e)
        if e.get("WORLD_SIZE") != str(a.world):
            bad("%s: WORLD_SIZE=%r, want %d" % (tag(e), e.get("WORLD_SIZE"), a.world))
    sizes = {}
    for node, es in sorted(per_node.items()):
        sizes[node] = len(es)
        for e in es:
            if e.get("LOCAL_WORLD_SIZE") != str(len(es)):
                bad("%s: LOCAL_WORLD_SIZE=%r, %d tasks ran on %s" % (tag(e), e.get("LOCAL_WORLD_SIZE"),
                                                                      len(es), node))
        lr = sorted(int(e.get("LOCAL_RANK", -1)) for e in es)
        if lr != list(range(len(es))):
            bad("%s: LOCAL_RANK values %s, want 0..%d" % (node, lr, len(es) - 1))
    if a.contiguous:
        # torchrun's numbering: RANK = tasks on earlier nodes + LOCAL_RANK,
        # GROUP_RANK = the node's index in the step
        base = 0
        by_id = {}
        for e in tasks:
            by_id.setdefault(int(e.get("SLURM_NODEID", -1)), []).append(e)
        for node_id in sorted(by_id):
            for e in by_id[node_id]:
                want = base + int(e.get("LOCAL_RANK", -1))
                if e.get("RANK") != str(want):
                    bad("%s: RANK=%r, want %d (contiguous per node)" % (tag(e), e.get("RANK"), want))
                if "GROUP_RANK" in e and e["GROUP_RANK"] != str(node_id):
                    bad("%s: GROUP_RANK=%r, want %d" % (tag(e), e.get("GROUP_RANK"), node_id))
            base += len(by_id[node_id])
    if not problems:
        print("# ranks 0..%d, tasks per node %s%s" % (a.world - 1, sizes,
                                                      ", contiguous" if a.contiguous else ""))


def cmd_gpus(a):
    tasks = load(a.dir)
    if not want_tasks(tasks, a.tasks, a.dir):
        return
    seen = {}
    for e in tasks:
        if e.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            bad("%s: CUDA_DEVICE_ORDER=%r, want PCI_BUS_ID" % (tag(e), e.get("CUDA_DEVICE_ORDER")))
        cvd = e.get("CUDA_VISIBLE_DEVICES")
        # what Slurm granted this task: SLURM_STEP_GPUS (rewritten per task when
        # binding is active) and GPU_DEVICE_ORDINAL, which Slurm sets to the same ids
        granted = set()
        for k in ("SLURM_STEP_GPUS", "GPU_DEVICE_ORDINAL"):
            if e.get(k):
                granted |= set(e[k].split(","))
        if not granted:
            bad("%s: Slurm granted no GPU (no SLURM_STEP_GPUS/GPU_DEVICE_ORDINAL)" % tag(e))
            continue
        if cvd is None or len(cvd.split(",")) != 1 or cvd not in granted:
            bad("%s: CUDA_VISIBLE_DEVICES=%r, want one of Slurm's %s" % (tag(e), cvd, sorted(granted)))
            continue
        node = e.get("SLURMD_NODENAME")
        if cvd in seen.setdefault(node, set()):
            bad("%s: CUDA_VISIBLE_DEVICES=%s given to two tasks on %s" % (tag(e), cvd, node))
        seen[node].add(cvd)
    if not problems:
        print("# GPUs per node: %s" % {k: sorted(v) for k, v in sorted(seen.items())})


def cmd_ports(a):
    ports = []
    for d in a.dirs:
        tasks = load(d)
        if not tasks:
            bad("%s: no task dumps" % d)
            continue
        p = {e.get("MASTER_PORT") for e in tasks}
        if len(p) != 1 or None in p:
            bad("%s: tasks of one step disagree on MASTER_PORT: %s" % (d, sorted(map(str, p))))
            continue
        port = p.pop()
        if not port.isdigit() or not a.base <= int(port) < a.base + a.range:
            bad("%s: MASTER_PORT=%s outside the site range [%d, %d)" % (d, port, a.base, a.base + a.range))
        ports.append(port)
    if len(ports) == len(a.dirs) and len(set(ports)) != len(ports):
        bad("concurrent steps share MASTER_PORT: %s" % ports)
    if not problems:
        print("# MASTER_PORT per step: %s" % ports)


def cmd_batch(a):
    with open(a.file) as fh:
        lines = [l for l in fh.read().splitlines() if l.startswith("BATCH ")]
    if len(lines) != 1:
        bad("%s: %d 'BATCH' lines, want 1" % (a.file, len(lines)))
        return
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        if ("%s=unset" % k) not in lines[0].split():
            bad("batch script environment has %s set: %s" % (k, lines[0]))


def cmd_perm(a):
    """GPU order: every task of a node sees the same CUDA_VISIBLE_DEVICES, a
    permutation of what Slurm granted (SLURM_STEP_GPUS), in PCI bus order;
    with --want, exactly that list (the topology plan's order) on every task."""
    tasks = load(a.dir)
    if not want_tasks(tasks, a.tasks, a.dir):
        return
    per_node = {}
    for e in tasks:
        cvd = e.get("CUDA_VISIBLE_DEVICES")
        granted = e.get("SLURM_STEP_GPUS")
        if e.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            bad("%s: CUDA_DEVICE_ORDER=%r" % (tag(e), e.get("CUDA_DEVICE_ORDER")))
        if cvd is None or granted is None:
            bad("%s: CUDA_VISIBLE_DEVICES=%r SLURM_STEP_GPUS=%r" % (tag(e), cvd, granted))
            continue
        if sorted(cvd.split(",")) != sorted(granted.split(",")):
            bad("%s: CUDA_VISIBLE_DEVICES=%s is not a permutation of %s" % (tag(e), cvd, granted))
        if a.want is not None and cvd != a.want:
            bad("%s: CUDA_VISIBLE_DEVICES=%s, want %s (Slurm granted %s)" % (tag(e), cvd, a.want,
                                                                             granted))
        per_node.setdefault(e.get("SLURMD_NODENAME"), set()).add(cvd)
    for node, lists in sorted(per_node.items()):
        if len(lists) != 1:
            bad("%s: tasks see different lists %s" % (node, sorted(lists)))
    if not problems:
        print("# GPU order per node: %s" % {n: sorted(l)[0] for n, l in sorted(per_node.items())})


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("contract")
    p.add_argument("dir")
    p.add_argument("cli")
    p.add_argument("cfg")
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--nproc-per-node", type=int, required=True)
    p.add_argument("--site")
    p.add_argument("--master-addr", default="n1")
    p.add_argument("--node-rank-from", choices=["nodeid", "group"], default="nodeid",
                   help="the node rank passed to accelrun env: SLURM_NODEID (default) or GROUP_RANK")
    p.set_defaults(fn=cmd_contract)
    p = sub.add_parser("order")
    p.add_argument("dir")
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--nproc-per-node", type=int, required=True)
    p.add_argument("--nodes", required=True, help="the expected node order, e.g. n1,n3,n2,n4")
    p.add_argument("--master-addr")
    p.set_defaults(fn=cmd_order)
    p = sub.add_parser("vars")
    p.add_argument("dir")
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--eq", action="append")
    p.add_argument("--unset", action="append")
    p.add_argument("--unset-prefix", action="append")
    p.add_argument("--cpus", help="the CPU list every task may run on, e.g. 0")
    p.set_defaults(fn=cmd_vars)
    p = sub.add_parser("nic")
    p.add_argument("dir")
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--map", required=True, help="GPU id=HCA pairs, e.g. 0=mlx5_0,2=mlx5_1")
    p.set_defaults(fn=cmd_nic)
    p = sub.add_parser("untouched")
    p.add_argument("dir")
    p.add_argument("--tasks", type=int, required=True)
    p.set_defaults(fn=lambda a: cmd_vars(argparse.Namespace(dir=a.dir, tasks=a.tasks, eq=None,
                                                            unset=CONTRACT_NAMES,
                                                            unset_prefix=CONTRACT_PREFIXES,
                                                            cpus=None)))
    p = sub.add_parser("layout")
    p.add_argument("dir")
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--contiguous", action="store_true",
                   help="also: ranks contiguous per node in node order, as torchrun numbers them")
    p.set_defaults(fn=cmd_layout)
    p = sub.add_parser("perm")
    p.add_argument("dir")
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--want", metavar="LIST",
                   help="the exact CUDA_VISIBLE_DEVICES every task must have, e.g. 0,2,1,3")
    p.set_defaults(fn=cmd_perm)
    p = sub.add_parser("gpus")
    p.add_argument("dir")
    p.add_argument("--tasks", type=int, required=True)
    p.set_defaults(fn=cmd_gpus)
    p = sub.add_parser("ports")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--base", type=int, required=True)
    p.add_argument("--range", type=int, required=True)
    p.set_defaults(fn=cmd_ports)
    p = sub.add_parser("batch")
    p.add_argument("file")
    p.set_defaults(fn=cmd_batch)
    a = ap.parse_args()
    try:
        a.fn(a)
    except (OSError, ValueError, KeyError) as e:
        bad("%s: %s" % (type(e).__name__, e))
    for m in problems:
        print(m)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
