"""Names shared by the library and the CLI, in a module that imports nothing (keeps ``--help`` fast)."""

BACKENDS: tuple[str, ...] = ("cuda", "triton", "torch")
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
TOLERANCE_MODES: tuple[str, ...] = ("default", "kernelbench-v0.1")
