from cyclepkg.a import A  # noqa: F401

B = 2
