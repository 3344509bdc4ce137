#!/usr/bin/env python3
"""One Slurm task of tests/slurm/preflight.sh case g, run with a real
accelerate stack (1.15.0 on torch 2.13.0, or 0.32.1 on Debian's torch 1.13):
Accelerator() sees the distributed state the accelrun SPANK plugin's
environment describes, and a gloo all_reduce through accelerate's reduce()
sums every rank's number."""
import socket

import accelerate
import torch
from accelerate import Accelerator

a = Accelerator()
total = a.reduce(torch.tensor([float(a.process_index + 1)]), reduction="sum")
print("reduce accelerate=%s torch=%s num_processes=%d process_index=%d distributed_type=%s "
      "backend=%s sum=%g host=%s"
      % (accelerate.__version__, torch.__version__.split("+")[0], a.num_processes, a.process_index,
         getattr(a.distributed_type, "value", a.distributed_type),
         torch.distributed.get_backend(), total.item(), socket.gethostname()), flush=True)
a.wait_for_everyone()
# Tear the process group down before exit: torch 2.x's gloo threads abort the
# process ("terminate called without an active exception") when the
# interpreter exits with the group still up.
torch.distributed.destroy_process_group()
