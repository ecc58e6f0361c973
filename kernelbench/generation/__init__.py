"""Generating candidate kernels with an LLM: the litellm client, code extraction and the run pipeline.

Nothing here imports litellm at module import time; the client imports it on first use, so the
evaluator and ``kernelbench --help`` never pay for it.
"""
