"""The timing loop both timings share: warm-up, then rounds of timed blocks until a stop rule is met.

Candidate timing runs two sides, the reference and the candidate, interleaved in ABBA order so
that drift cancels in the speedup; reference-only timing (baselines) runs one. Each side is a worker
answering :class:`~kernelbench.evaluation.protocol.Time`. This module sends the blocks in order and
keeps what they measured; what to decide from it (block size, order, when to stop) is
:mod:`kernelbench.evaluation.timing`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kernelbench.evaluation import protocol
from kernelbench.evaluation import seeds as seedlib
from kernelbench.evaluation.timing import block_size

#: Sends one Time command to a side's worker: ``(command, timeout_s, what) -> reply``.
TimeCall = Callable[[protocol.Time, float, str], protocol.TimeReply]
#: Warm-up calls cycle through this many input sets.
WARMUP_SEEDS = 4


@dataclass
class TimedSide:
    """One worker being timed, and what its blocks have measured so far."""

    #: Its name in the ABBA order (:func:`kernelbench.evaluation.timing.block_order`).
    name: str
    #: How error messages name it: the side, or a baseline's mode.
    label: str
    ask: TimeCall
    warm: protocol.TimeReply | None = None
    samples_ms: list[float] = field(default_factory=list)
    drained_ms: list[float] = field(default_factory=list)
    spent_s: float = 0.0

    def add(self, reply: protocol.TimeReply) -> None:
        self.samples_ms.extend(float(x) for x in reply.times_ms)
        self.drained_ms.extend(float(x) for x in reply.drained_ms)
        self.spent_s += float(reply.wall_s)


def seed_lists(secret: bytes, label: str, fwd_label: str | None, count: int,
               *where: object) -> tuple[list[int], list[int]]:
    """``count`` input seeds and as many forward seeds (the input seeds themselves if ``fwd_label`` is None)."""
    seeds = [seedlib.derive_seed(secret, label, *where, i) for i in range(count)]
    if fwd_label is None:
        return seeds, seeds
    return seeds, [seedlib.derive_seed(secret, fwd_label, *where, i) for i in range(count)]


def warm_up(sides: Sequence[TimedSide], seeds: list[int], fwd_seeds: list[int], limit_s: float,
            cushion_us: int, fingerprint: bool = False) -> int:
    """Warm each side up in turn; returns the calls per block, sized by the slowest side's calls.

    ``fingerprint``: the timed calls will be fingerprinted, so each side makes its fingerprint buffers at the
    end of its warm-up rather than at its first timed call."""
    for side in sides:
        side.warm = side.ask(protocol.Time(seeds=seeds, fwd_seeds=fwd_seeds, warmup=True, fingerprint=fingerprint,
                                           cushion_us=cushion_us), limit_s, f"{side.label} warm-up")
    return block_size(max(s.warm.wall_s / max(1, s.warm.calls) for s in sides))


def run_rounds(sides: Mapping[str, TimedSide], order: Callable[[int], Sequence[str]],
               block_seeds: Callable[[int], tuple[list[int], list[int]]], fingerprint: bool, limit_s: float,
               accept: Callable[[int, dict[str, protocol.TimeReply]], bool],
               stop: Callable[[int], tuple[bool, str]], cushion_us: int) -> tuple[int, str | None]:
    """Time rounds of one block per side until ``stop`` says so; returns the rounds and why they stopped.

    Round ``r`` times ``block_seeds(r)`` on each side in ``order(r)``; ``accept`` sees the round's replies
    and ends the loop by returning False (the reason is then None: it recorded its own failure).
    """
    rounds = 0
    while True:
        seeds, fwds = block_seeds(rounds)
        replies = {}
        for name in order(rounds):
            side = sides[name]
            reply = side.ask(protocol.Time(seeds=seeds, fwd_seeds=fwds, warmup=False, fingerprint=fingerprint,
                                           cushion_us=cushion_us), limit_s, f"{side.label} timing")
            replies[name] = reply
            side.add(reply)
        if not accept(rounds, replies):
            return rounds, None
        rounds += 1
        done, why = stop(rounds)
        if done:
            return rounds, why
