"""A throwaway package with a planted import cycle (tests/preflight/run.sh).

Imported from one thread it always works: this __init__ imports `a` first,
and `a` defines A before it imports `b`, which needs only A.  Imported from
threads at once, a thread that asks for cyclepkg.b while another is still
in this __init__ (the sleep stands for a slow import such as torch's) runs
`b` first: `b` imports `a`, `a` asks `b` for B, which `b` has not defined
yet: ImportError, "partially initialized module".  The shape of accelerate
1.14.0's cycle between accelerate.utils and accelerate.big_modeling.
"""
import time

time.sleep(0.2)
from . import a  # noqa: E402,F401
