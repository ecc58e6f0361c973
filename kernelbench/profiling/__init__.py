"""Nsight Compute profiles of a candidate's forward: per-kernel metrics, the limiting factor, the roofline.

``kernelbench profile`` and refinement with ``--feedback profile`` use :func:`profile_candidate`; the
CSV reader (:mod:`.ncu`) and the report (:mod:`.report`) need no GPU and are what the CPU tests exercise.
"""

from __future__ import annotations

from kernelbench.profiling.ncu import METRICS, NcuError, NcuLaunch, failure_reason, find_ncu, parse_ncu_csv
from kernelbench.profiling.report import KernelProfile, KernelSummary, ProfileReport, limiting_factor
from kernelbench.profiling.run import ProfileOptions, ProfileUnavailable, check_profilable, profile_candidate

__all__ = ["METRICS", "KernelProfile", "KernelSummary", "NcuError", "NcuLaunch", "ProfileOptions", "ProfileReport",
           "ProfileUnavailable", "check_profilable", "failure_reason", "find_ncu", "limiting_factor", "parse_ncu_csv",
           "profile_candidate"]
