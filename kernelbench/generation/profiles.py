"""Profilers for refinement with ``--feedback profile``: what goes back to the model after a correct turn.

:func:`local_profiler` profiles on this machine's GPU with Nsight Compute (:mod:`kernelbench.profiling`)
and turns every reason it cannot into the note "profile unavailable: <why>", so a run on a machine without
a GPU or ``ncu`` goes on, and the model is told why there is no profile. :func:`unavailable_profiler`
says the same for runs that evaluate elsewhere (Modal).
"""

from __future__ import annotations

from kernelbench.generation.pipeline import ProfileNote, Profiler


def local_profiler(backend: str, precision: str = "fp32", options=None) -> Profiler:
    """Profile on the local GPU; ``options`` is a :class:`kernelbench.profiling.ProfileOptions`."""

    def profile(problem, source: str) -> ProfileNote:
        from kernelbench.profiling import ProfileUnavailable, profile_candidate

        try:
            report = profile_candidate(problem, source, backend, precision, options)
        except ProfileUnavailable as e:
            return ProfileNote(f"profile unavailable: {e}")
        return ProfileNote(report.to_text(), report.model_dump_json(indent=1))

    return profile


def unavailable_profiler(reason: str) -> Profiler:
    """Every profile is "profile unavailable: ``reason``" (e.g. candidates evaluated on Modal)."""

    def profile(problem, source: str) -> ProfileNote:
        return ProfileNote(f"profile unavailable: {reason}")

    return profile


__all__ = ["local_profiler", "unavailable_profiler"]
