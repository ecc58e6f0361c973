"""Nsight Compute (``ncu``): the metrics we ask for, the command line, and reading its CSV.

``ncu --csv`` prints either page, and both are read here:

* ``--page raw`` (what :func:`ncu_command` asks for): one header row (``"ID","Process ID",...,"Kernel
  Name",...`` then one column per metric), one row of units (empty under the identifying columns), then
  one row per profiled kernel launch.
* the default ``details`` page: the same identifying columns, then ``"Section Name","Metric Name",
  "Metric Unit","Metric Value"``: one row per (launch, metric). With ``--section`` sets the metric names
  are the section's labels (``Duration``, ``Memory Throughput``, ``Achieved Occupancy``...).

Values are quoted and may carry thousands separators (``"1,234.56"``); a metric the device cannot
collect reads ``n/a``. Lines before the header (``==PROF==`` progress, ``==WARNING==``, the program's own
output when it shares the stream) and after the table are skipped. Units are normalised to
microseconds, bytes and percent.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.errors import KernelBenchError

#: Environment variable naming the ncu binary (else ``ncu`` on PATH, else the CUDA toolkit's).
NCU_ENV = "KERNELBENCH_NCU"

#: Raw metric -> our field. One ncu pass group on Hopper; all are in ncu's "SpeedOfLight", "Occupancy" and
#: "LaunchStats" sections.
METRICS: dict[str, str] = {
    "gpu__time_duration.sum": "duration_us",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__block_size": "block_size",
    "launch__grid_size": "grid_size",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "device__attribute_multiprocessor_count": "sm_count",
}
#: Section labels (details page of ``--section SpeedOfLight --section Occupancy --section LaunchStats``).
LABELS: dict[str, str] = {
    "Duration": "duration_us",
    "Memory Throughput": "memory_pct",
    "DRAM Throughput": "dram_pct",
    "Compute (SM) Throughput": "sm_pct",
    "Achieved Occupancy": "achieved_occupancy_pct",
    "Theoretical Occupancy": "theoretical_occupancy_pct",
    "Registers Per Thread": "registers_per_thread",
    "Block Size": "block_size",
    "Grid Size": "grid_size",
    "# SMs": "sm_count",
}
FIELDS = tuple(dict.fromkeys(METRICS.values()))
_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC")

_TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "nsec": 1e-3, "us": 1.0, "usecond": 1.0, "usec": 1.0, "µs": 1.0,
            "ms": 1e3, "msecond": 1e3, "msec": 1e3, "s": 1e6, "second": 1e6, "sec": 1e6}
_BYTES = {"byte": 1, "bytes": 1, "b": 1, "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9,
          "gb": 1e9, "tbyte": 1e12, "tb": 1e12, "kibyte": 1024, "kib": 1024, "mibyte": 1024**2, "mib": 1024**2,
          "gibyte": 1024**3, "gib": 1024**3}
_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][+-]?\d+)?$")


class NcuError(KernelBenchError):
    """ncu is missing, not permitted, or its output cannot be read (the message says which, in one line)."""


@dataclass
class NcuLaunch:
    """One profiled kernel launch as ncu reported it: identifying columns and our fields (normalised units)."""

    launch_id: int
    kernel: str
    stream: int | None = None
    values: dict[str, float | None] = field(default_factory=dict)


def find_ncu(explicit: str | None = None) -> str:
    """The ncu binary: ``explicit``, else ``$KERNELBENCH_NCU``, else ``ncu`` on PATH, else the CUDA toolkit's."""
    for cand in (explicit, os.environ.get(NCU_ENV)):
        if cand:
            path = shutil.which(cand) or (cand if os.path.isfile(cand) and os.access(cand, os.X_OK) else None)
            if path is None:
                raise NcuError(f"ncu not found at {cand}: install Nsight Compute (it ships with the CUDA toolkit)")
            return path
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ncu").is_file():
            return str(Path(root) / "bin" / "ncu")
    raise NcuError("ncu (Nsight Compute) was not found on PATH or in the CUDA toolkit: install it, or name it with "
                   f"--ncu PATH or ${NCU_ENV}")


def ncu_command(ncu: str, target: list[str], log_file: str) -> list[str]:
    """Profile every kernel launched between ``cudaProfilerStart`` and ``cudaProfilerStop`` in ``target``.

    Base units (``--print-units base``) and the raw page, so that each launch is one row with one column
    per metric. ncu's defaults stay: each kernel replayed alone with caches flushed and clocks locked to
    base (stable numbers, slower than the timed run).
    """
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
            "--profile-from-start", "off", "--target-processes", "all", "--log-file", log_file, *target]


def failure_reason(output: str, returncode: int | None) -> str | None:
    """Why ncu failed, in one line, from its output (stdout, stderr and log together); None if it did not."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("ncu is not permitted to read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver restricts "
                "them to administrators (profile as root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0; "
                "a container also needs the capability; in the sandbox candidate code runs as an unprivileged user, "
                "so also try --no-sandbox for your own kernels)")
    m = re.search(r"==ERROR==\s*(.+)", output)
    if m:
        return f"ncu failed: {m.group(1).strip()[:300]}"
    if returncode not in (0, None):
        return None  # the caller knows what ran and reports the exit status with its own context
    return None


def _number(text: str) -> float | None:
    t = text.strip().replace("\u00a0", "").replace(" ", "")
    if not t or t.lower() in ("n/a", "nan", "-", "--"):
        return None
    if not _NUMBER.match(t):
        return None
    return float(t.replace(",", ""))


def _convert(value: float | None, unit: str, field_name: str) -> float | None:
    """``value`` in ``unit`` to our field's unit (microseconds, bytes, percent, plain counts)."""
    if value is None:
        return None
    u = re.sub(r"/s(ec(ond)?)?$", "", unit.strip().lower())
    if field_name == "duration_us":
        return value * _TIME_US.get(u, 1e-3 if not u else 1.0)  # no unit: ncu's base unit, nanoseconds
    if field_name.endswith("_bytes"):
        return value * _BYTES.get(u, 1)
    return value


def _rows(text: str) -> list[list[str]]:
    """The CSV table in ncu's output: from the header row to the last row that parses as CSV."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') and '"Kernel Name"' in line), None)
    if start is None:
        return []
    table = []
    for line in lines[start:]:
        if not line.startswith('"'):
            if table and line.strip() == "":
                continue
            if table:
                break
        table.append(line)
    return list(csv.reader(io.StringIO("\n".join(table))))


def parse_ncu_csv(text: str) -> list[NcuLaunch]:
    """Every kernel launch in ncu's CSV output (raw or details page), in launch order.

    Raises :class:`NcuError` when there is no table at all (ncu printed something else); an empty table
    (no kernel was profiled) gives ``[]``.
    """
    rows = _rows(text)
    if not rows:
        raise NcuError("no CSV table in ncu's output (was it run with --csv?)")
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    if "Metric Name" in col and "Metric Value" in col:
        return _parse_details(rows, col)
    return _parse_raw(rows, col)


def _identity(row: list[str], col: dict[str, int]) -> tuple[int, str, int | None] | None:
    def cell(name: str) -> str:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    launch_id = _number(cell("ID"))
    if launch_id is None:
        return None
    stream = _number(cell("Stream"))
    return int(launch_id), cell("Kernel Name"), int(stream) if stream is not None else None


def _parse_raw(rows: list[list[str]], col: dict[str, int]) -> list[NcuLaunch]:
    header = rows[0]
    body = rows[1:]
    units = [""] * len(header)
    if body and _identity(body[0], col) is None:  # the units row: no launch ID
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    wanted = {i: METRICS[name] for i, name in enumerate(header) if name in METRICS}
    out = []
    for row in body:
        ident = _identity(row, col)
        if ident is None:
            continue
        launch = NcuLaunch(*ident)
        for i, field_name in wanted.items():
            raw = row[i] if i < len(row) else ""
            launch.values[field_name] = _convert(_number(raw), units[i], field_name)
        out.append(launch)
    return out


def _parse_details(rows: list[list[str]], col: dict[str, int]) -> list[NcuLaunch]:
    launches: dict[int, NcuLaunch] = {}
    name_i, unit_i, value_i = col["Metric Name"], col.get("Metric Unit"), col["Metric Value"]
    for row in rows[1:]:
        ident = _identity(row, col)
        if ident is None or max(name_i, value_i) >= len(row):
            continue
        launch = launches.setdefault(ident[0], NcuLaunch(*ident))
        metric = row[name_i]
        field_name = METRICS.get(metric) or LABELS.get(metric)
        if field_name is None or field_name in launch.values and launch.values[field_name] is not None:
            continue  # one value per field: the first (a section can repeat a label in another unit)
        unit = row[unit_i] if unit_i is not None and unit_i < len(row) else ""
        if field_name.endswith("_pct") and unit.strip() not in ("%", ""):
            continue  # e.g. "Memory Throughput" in Gbyte/second next to the one in %
        launch.values[field_name] = _convert(_number(row[value_i]), unit, field_name)
    return [launches[k] for k in sorted(launches)]


def launches_from_files(paths: Iterable[Path]) -> list[NcuLaunch]:
    out: list[NcuLaunch] = []
    for p in paths:
        out.extend(parse_ncu_csv(Path(p).read_text(encoding="utf-8", errors="replace")))
    return out


__all__ = ["FIELDS", "LABELS", "METRICS", "NCU_ENV", "NcuError", "NcuLaunch", "failure_reason", "find_ncu",
           "ncu_command", "parse_ncu_csv"]
