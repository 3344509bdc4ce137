A = 1
from cyclepkg.b import B  # noqa: E402,F401
