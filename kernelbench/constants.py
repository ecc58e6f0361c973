"""Names shared by the library and the CLI, in a module that imports nothing (keeps ``--help`` fast).

Backends are not listed here: :mod:`kernelbench.backends` is their registry (``backend_names()``).
"""

PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
TOLERANCE_MODES: tuple[str, ...] = ("default", "kernelbench-v0.1")
