"""KernelBench-style evaluation of LLM-written GPU kernels.

The top-level package stays import-light on purpose: an evaluation-only machine (or a Modal
image) imports ``kernelbench`` without paying for litellm, modal, datasets or transformers.
"""

__version__ = "0.1.0"

#: Bumped whenever the timing protocol changes in a way that makes old numbers incomparable.
#: kb-timing-2: fp32 references run in IEEE fp32 (cuDNN TF32 off) under the strict tolerance.
#: kb-timing-3: each timed call starts behind a 200 us device-side spin (the launch cushion, see
#: ``evaluation.timing.LAUNCH_CUSHION_US``), so host latency before the first kernel is not timed;
#: multi-kernel references time 1-9% faster than under kb-timing-2 on an H100.
TIMING_PROTOCOL_VERSION = "kb-timing-3"
