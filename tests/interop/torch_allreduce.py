#!/usr/bin/python3
"""One Slurm task of the interop test (tests/slurm/run.sh, case o).

PyTorch's own env:// rendezvous, fed by nothing but the environment the
accelrun SPANK plugin gave the task (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE): gloo all_reduce of a tensor holding rank+1.  With 4 ranks every
rank must print sum=10.
"""
import datetime
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
world = dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print("allreduce rank=%d env_rank=%s world=%d sum=%g host=%s local_rank=%s" %
      (rank, os.environ.get("RANK"), world, t.item(), socket.gethostname(),
       os.environ.get("LOCAL_RANK")), flush=True)
dist.barrier()
dist.destroy_process_group()
