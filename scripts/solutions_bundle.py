"""Results bundle for a demo-board entry (worked solutions) from a recorded run of scripts/eval_solutions.py.

    python scripts/solutions_bundle.py --measurement docs/measurements/eval_solutions_H100_kb-timing-3.json \
        --submission examples/demo-board/submissions/worked_solutions_triton.json \
        --out examples/demo-board/data/evaluations --evaluated-on 2026-11-22

The demo board's entries are the package's worked solutions (kernelbench/solutions/), and
scripts/eval_solutions.py (``bash scripts/gpu_check.sh solutions``) evaluates every one of them on a GPU
through the full evaluator and records each KernelResult. This writes those measured results as the
bundle ``kernelbench leaderboard evaluate`` would have written for the entry, so the demo board can be
regenerated from a real GPU run without another one. ``--refresh-submission`` first rewrites the
submission's kernels from the package (its metadata kept), for when the solutions changed since the file
was written.

Nothing is written unless every ranked kernel of the submission has a result in the record that was
measured on the problem as it is today (its hash), under today's timing protocol, from the same source:
the record's ``source_sha256`` where it has one, else the package's worked solution (the only code
eval_solutions.py evaluates; a record without source hashes cannot prove more, which is said).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import _checkout  # noqa: F401  (this checkout's kernelbench and leaderboard first on the path)


class BundleError(Exception):
    """The record cannot stand for the entry's evaluation; the message says why, in one line."""


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _load_record(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BundleError(f"cannot read the measurement {path}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("solutions"), list):
        raise BundleError(f"{path} is not a record written by scripts/eval_solutions.py --out (no 'solutions' list)")
    return data


def refreshed_submission(path: Path, backend: str) -> str:
    """The submission's text with its kernels replaced by the package's worked solutions of ``backend``."""
    from kernelbench.solutions import submission_kernels

    data = json.loads(path.read_text(encoding="utf-8"))
    data["kernels"] = submission_kernels(backend)
    return json.dumps(data, indent=2) + "\n"


def build(measurement: Path, submission: Path, evaluated_on: str | None, entry: str | None = None):
    """The bundle, or BundleError naming the first kernel the record cannot stand for."""
    from kernelbench import TIMING_PROTOCOL_VERSION
    from kernelbench.problems import load_builtin
    from kernelbench.problems.identity import identify
    from kernelbench.results import KernelResult
    from kernelbench.solutions import list_solutions
    from leaderboard.bundle import ResultsBundle, check_gpu_label
    from leaderboard.evaluate import measured_gpu
    from leaderboard.schema import entry_id_for, load_submission

    record = _load_record(measurement)
    sub = load_submission(submission)
    problems = load_builtin()
    by_key: dict[tuple[str, int, int], dict] = {}
    for item in record["solutions"]:
        try:
            by_key[(str(item["backend"]), int(item["level"]), int(item["problem_id"]))] = item
        except (KeyError, TypeError, ValueError):
            raise BundleError(f"{measurement}: a solution entry lacks backend, level or problem_id") from None
    package = {(s.backend, s.level, s.problem_id): s.source for s in list_solutions()}
    results: list[KernelResult] = []
    unproven = 0
    for key, source in sub.kernel_items(ranked_only=True):
        backend = sub.backend_for(source)
        item = by_key.get((backend, key.level, key.problem_id))
        if item is None:
            raise BundleError(f"{key}: {measurement} has no {backend} result for level {key.level} problem "
                              f"{key.problem_id}")
        recorded_sha = item.get("source_sha256")
        if recorded_sha is not None:
            if recorded_sha != source_sha256(source):
                raise BundleError(f"{key}: the measured source is not this kernel (source_sha256 differs)")
        else:
            if package.get((backend, key.level, key.problem_id)) != source:
                raise BundleError(f"{key}: not the package's worked solution, which is what the record measured; "
                                  "--refresh-submission rewrites the kernels from the package")
            unproven += 1
        result = KernelResult.model_validate(item["result"])
        problem = problems.get(key.level, key.problem_id)
        if not result.problem_hash or not problem.matches_hash(result.problem_hash):
            raise BundleError(f"{key}: measured on an earlier version of {problem.name}; evaluate it again")
        protocol = result.environment.timing_protocol if result.environment else None
        if result.runtime is not None and protocol != TIMING_PROTOCOL_VERSION:
            raise BundleError(f"{key}: timed under protocol {protocol!r}, not today's {TIMING_PROTOCOL_VERSION!r}")
        results.append(result.model_copy(update={"sample_id": key.sample_id}))
    gpu = check_gpu_label(measured_gpu(results, "GPU"))
    bundle = ResultsBundle(
        entry=entry or entry_id_for(submission), gpu=gpu, submission_sha256=sub.sha256(), problem_source=problems.source,
        problem_set=identify(problems), runner="local (scripts/eval_solutions.py)",
        evaluated_on=evaluated_on,
        settings={"recorded_by": "scripts/eval_solutions.py", "measurement": measurement.as_posix()},
        results=results)
    return bundle, unproven


def main(argv: list[str] | None = None) -> int:
    from kernelbench.backends import solution_backends

    p = argparse.ArgumentParser(prog="solutions_bundle.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("--measurement", required=True, type=Path, help="JSON written by scripts/eval_solutions.py --out")
    p.add_argument("--submission", required=True, type=Path, help="the entry's submission file")
    p.add_argument("--out", required=True, type=Path, help="folder for <entry>__<GPU>.json")
    p.add_argument("--evaluated-on", default=None, help="the day the measurement ran (ISO date)")
    p.add_argument("--refresh-submission", choices=solution_backends(), default=None, metavar="BACKEND",
                   help="first rewrite the submission's kernels from the package's worked solutions of BACKEND")
    args = p.parse_args(argv)

    import tempfile

    from kernelbench.errors import KernelBenchError
    from kernelbench.io_utils import atomic_write_text
    from leaderboard.bundle import write_bundle
    from leaderboard.schema import entry_id_for

    try:
        entry = entry_id_for(args.submission)
        refreshed = refreshed_submission(args.submission, args.refresh_submission) if args.refresh_submission else None
        with tempfile.TemporaryDirectory() as tmp:
            candidate = args.submission
            if refreshed is not None:  # checked before anything is written: a refusal leaves every file as it was
                candidate = Path(tmp) / args.submission.name
                candidate.write_text(refreshed, encoding="utf-8")
            bundle, unproven = build(args.measurement, candidate, args.evaluated_on, entry=entry)
        if refreshed is not None:
            atomic_write_text(args.submission, refreshed)
        path = write_bundle(bundle, args.out)
    except (BundleError, KernelBenchError, ValueError, OSError) as e:
        print(f"solutions_bundle.py: error: {e}", file=sys.stderr)
        return 2
    if unproven:
        print(f"note: {args.measurement} records no source hashes: {unproven} kernel(s) are taken to be the "
              "package's worked solutions as they are now (check that kernelbench/solutions did not change after "
              "the measurement)", file=sys.stderr)
    print(f"wrote {path}: {len(bundle.results)} result(s) of {bundle.entry} on {bundle.gpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
