"""Progress bars that are drawn only on a terminal.

Every bar in the project comes from :func:`progress_bar`: on stderr, and only when the caller asked for
progress *and* stderr is a terminal (tqdm's ``disable=None``). A CI job, a ``nohup`` run or a pipe to a
log file gets no bar: redrawn with carriage returns, a bar turns a log into one enormous line. What a
run found is reported in its results and summary, never only in a bar.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str | None = None,
                 unit: str = "it", enabled: bool = True, leave: bool = True) -> Any:
    """A tqdm bar on stderr: off unless ``enabled`` and stderr is a terminal. Use it as tqdm itself."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, leave=leave,
                disable=None if enabled else True)
