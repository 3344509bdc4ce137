#!/usr/bin/env python3
"""One Slurm task of the interop test (tests/slurm/run.sh, case p), run with
a real accelerate release: Accelerator() must see the distributed state the
accelrun SPANK plugin's environment describes."""
import socket

import torch

from accelerate import Accelerator

a = Accelerator()
print("accelerator num_processes=%d process_index=%d distributed_type=%s mixed_precision=%s host=%s"
      % (a.num_processes, a.process_index, getattr(a.distributed_type, "value", a.distributed_type),
         a.mixed_precision, socket.gethostname()), flush=True)
a.wait_for_everyone()
# Tear the process group down before exit: torch 2.x's gloo threads abort the
# process ("terminate called without an active exception") when the
# interpreter exits with the group still up.
torch.distributed.destroy_process_group()
