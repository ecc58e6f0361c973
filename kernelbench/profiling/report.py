"""A profile of one forward: per-kernel metrics, the limiting factor derived from them, and its two renderings.

The measurement (:class:`KernelProfile` per launch, :class:`ProfileReport` for the forward) is kept apart
from its display: :meth:`ProfileReport.to_text` is the compact form a refinement prompt carries,
``model_dump_json`` the JSON that ``kernelbench profile --json`` prints.

The limiting factor follows Nsight Compute's own reading of its Speed Of Light section: a kernel whose
memory or compute throughput reaches :data:`BOUND_PCT` of the peak is bound by that unit; below it on both,
the kernel is latency-bound, and the likely cause is named when the launch shows one (fewer blocks than the
GPU has SMs, low achieved occupancy).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Throughput (percent of peak) from which a unit counts as the limiter (Nsight Compute's own guidance).
BOUND_PCT = 60.0
#: Achieved occupancy (percent of the SM's warp slots) below which a latency-bound kernel is called starved.
LOW_OCCUPANCY_PCT = 25.0
#: Kernels this short are dominated by launch overhead, whatever their throughput.
TINY_KERNEL_US = 5.0
_NAME_CHARS = 90


class KernelProfile(BaseModel):
    """One kernel launch under ncu. Percentages are of the device's peak; ``None`` where ncu reported n/a."""

    launch_id: int
    kernel: str
    #: The candidate's own kernel (its name is one the runtime guard recognises), as opposed to PyTorch's.
    own: bool = False
    stream: int | None = None
    duration_us: float | None = None
    memory_pct: float | None = Field(default=None, description="Memory throughput (the busiest memory unit).")
    dram_pct: float | None = None
    sm_pct: float | None = Field(default=None, description="Compute (SM) throughput.")
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers_per_thread: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    sm_count: float | None = None

    @property
    def limiter(self) -> str:
        return limiting_factor(self)


def limiting_factor(k: KernelProfile) -> str:
    """What holds the kernel back, in a few words (see the module docstring for the rule)."""
    mem, sm = k.memory_pct, k.sm_pct
    if mem is None and sm is None:
        return "unknown (no throughput metrics)"
    mem_v, sm_v = mem or 0.0, sm or 0.0
    if max(mem_v, sm_v) >= BOUND_PCT:
        if mem_v >= sm_v:
            return f"memory-bound ({mem_v:.0f}% of peak memory throughput)"
        return f"compute-bound ({sm_v:.0f}% of peak SM throughput)"
    if k.duration_us is not None and k.duration_us < TINY_KERNEL_US:
        return f"launch-bound (a {k.duration_us:.1f} us kernel: too little work per launch)"
    if k.grid_size is not None and k.sm_count and k.grid_size < k.sm_count:
        return f"latency-bound: too few blocks ({k.grid_size:.0f} for {k.sm_count:.0f} SMs)"
    occ = k.achieved_occupancy_pct
    if occ is not None and occ < LOW_OCCUPANCY_PCT:
        theo = f", {k.theoretical_occupancy_pct:.0f}% possible" if k.theoretical_occupancy_pct is not None else ""
        regs = f", {k.registers_per_thread:.0f} registers/thread" if k.registers_per_thread is not None else ""
        return f"latency-bound: low occupancy ({occ:.0f}% of warp slots{theo}{regs})"
    return "latency-bound (neither memory nor compute throughput reaches 60% of peak)"


class KernelSummary(BaseModel):
    """The launches of one kernel (by name) added up: time summed, percentages weighted by time."""

    kernel: str
    own: bool
    launches: int
    total_us: float
    share: float | None = None
    memory_pct: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers_per_thread: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    limiter: str = ""


class ProfileReport(BaseModel):
    """An Nsight Compute profile of one ``forward`` of a candidate on one problem."""

    level: int
    problem_id: int
    problem_name: str
    backend: str
    precision: str = "fp32"
    gpu: str | None = None
    kernels: list[KernelProfile] = Field(default_factory=list)
    #: The problem's speed-of-light bound on this GPU (kernelbench.roofline), when known.
    sol_bound_ms: float | None = None
    sol_bound_by: str | None = None
    #: Where the bound or its inputs are missing, why.
    notes: list[str] = Field(default_factory=list)
    isolation: str | None = None
    ncu_command: list[str] = Field(default_factory=list)

    @property
    def total_us(self) -> float:
        """GPU time of the forward: the profiled kernels' durations added (no gaps between launches)."""
        return sum(k.duration_us or 0.0 for k in self.kernels)

    @property
    def own_us(self) -> float:
        return sum(k.duration_us or 0.0 for k in self.kernels if k.own)

    @property
    def roofline_fraction(self) -> float | None:
        """Speed-of-light bound / the forward's GPU time: 1.0 would be a forward at the roofline."""
        if self.sol_bound_ms is None or self.total_us <= 0:
            return None
        return self.sol_bound_ms * 1000.0 / self.total_us

    def by_kernel(self) -> list[KernelSummary]:
        groups: dict[tuple[str, bool], list[KernelProfile]] = {}
        for k in self.kernels:
            groups.setdefault((k.kernel, k.own), []).append(k)
        total = self.total_us
        out = []
        for (name, own), ks in groups.items():
            t = sum(k.duration_us or 0.0 for k in ks)

            def weighted(attr: str, ks: list[KernelProfile] = ks, t: float = t) -> float | None:
                pairs = [(getattr(k, attr), k.duration_us or 0.0) for k in ks if getattr(k, attr) is not None]
                if not pairs:
                    return None
                w = sum(d for _, d in pairs)
                return sum(v * d for v, d in pairs) / w if w > 0 else sum(v for v, _ in pairs) / len(pairs)

            first = ks[0]
            merged = KernelProfile(launch_id=first.launch_id, kernel=name, own=own, duration_us=t / len(ks),
                                   memory_pct=weighted("memory_pct"), dram_pct=weighted("dram_pct"),
                                   sm_pct=weighted("sm_pct"), achieved_occupancy_pct=weighted("achieved_occupancy_pct"),
                                   theoretical_occupancy_pct=weighted("theoretical_occupancy_pct"),
                                   registers_per_thread=first.registers_per_thread, block_size=first.block_size,
                                   grid_size=first.grid_size, sm_count=first.sm_count)
            out.append(KernelSummary(kernel=name, own=own, launches=len(ks), total_us=t,
                                     share=t / total if total > 0 else None, memory_pct=merged.memory_pct,
                                     dram_pct=merged.dram_pct, sm_pct=merged.sm_pct,
                                     achieved_occupancy_pct=merged.achieved_occupancy_pct,
                                     theoretical_occupancy_pct=merged.theoretical_occupancy_pct,
                                     registers_per_thread=merged.registers_per_thread, block_size=merged.block_size,
                                     grid_size=merged.grid_size, limiter=limiting_factor(merged)))
        return sorted(out, key=lambda s: -s.total_us)

    def to_text(self, max_kernels: int = 8) -> str:
        """The compact form for a prompt: one line for the forward, one per kernel (heaviest first)."""
        head = f"Nsight Compute profile of one forward of level {self.level} problem {self.problem_id} " \
               f"({self.problem_name})" + (f" on {self.gpu}" if self.gpu else "") + \
               " (each kernel replayed alone, clocks locked to base: compare shares, not absolute times)."
        lines = [head]
        n = len(self.kernels)
        if n == 0:
            lines.append("forward launched no GPU kernel while it was profiled.")
            return "\n".join(lines + [f"note: {x}" for x in self.notes]) + "\n"
        total_ms = self.total_us / 1000.0
        own = self.own_us / self.total_us if self.total_us > 0 else None
        line = f"forward: {n} kernel launch{'es' if n != 1 else ''}, {total_ms:.4g} ms of GPU time"
        if own is not None:
            line += f"; your own kernels {own:.0%} of it"
        if self.sol_bound_ms is not None:
            frac = self.roofline_fraction
            line += f"; speed-of-light bound {self.sol_bound_ms:.4g} ms ({self.sol_bound_by}-bound)"
            if frac is not None:
                line += f", so the forward runs at {frac:.0%} of the roofline"
        lines.append(line + ".")
        summaries = self.by_kernel()
        for s in summaries[:max_kernels]:
            name = s.kernel if len(s.kernel) <= _NAME_CHARS else s.kernel[:_NAME_CHARS - 3] + "..."
            parts = [f"- {name} ({'yours' if s.own else 'PyTorch/library'})",
                     f"{s.launches} launch{'es' if s.launches != 1 else ''}, {s.total_us / 1000.0:.4g} ms"
                     + (f" ({s.share:.0%} of GPU time)" if s.share is not None else "")]
            metrics = []
            if s.memory_pct is not None:
                metrics.append(f"memory {s.memory_pct:.0f}% of peak"
                               + (f" (DRAM {s.dram_pct:.0f}%)" if s.dram_pct is not None else ""))
            if s.sm_pct is not None:
                metrics.append(f"compute (SM) {s.sm_pct:.0f}%")
            if s.achieved_occupancy_pct is not None:
                metrics.append(f"occupancy {s.achieved_occupancy_pct:.0f}% achieved"
                               + (f" of {s.theoretical_occupancy_pct:.0f}% possible"
                                  if s.theoretical_occupancy_pct is not None else ""))
            if s.registers_per_thread is not None:
                metrics.append(f"{s.registers_per_thread:.0f} registers/thread")
            if s.grid_size is not None and s.block_size is not None:
                metrics.append(f"{s.grid_size:.0f} blocks x {s.block_size:.0f} threads")
            lines.append(": ".join([", ".join(parts), ", ".join(metrics)]) + f" -> {s.limiter}")
        if len(summaries) > max_kernels:
            rest = summaries[max_kernels:]
            lines.append(f"- ... {len(rest)} more kernel(s), {sum(s.total_us for s in rest) / 1000.0:.4g} ms")
        lines.extend(f"note: {x}" for x in self.notes)
        return "\n".join(lines) + "\n"


__all__ = ["BOUND_PCT", "KernelProfile", "KernelSummary", "ProfileReport", "limiting_factor"]
