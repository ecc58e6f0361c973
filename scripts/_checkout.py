"""Imported first by the scripts that need it: this checkout's root goes first on ``sys.path``.

A script runs from a checkout (``python scripts/<name>.py``), where Python puts only ``scripts/`` on
the path. The repository's ``leaderboard/`` and ``modal_app/`` are not part of the installed package,
and a script measuring or converting with this checkout's code must not pick up another installed
``kernelbench``; so the root of the checkout this file sits in comes first.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))
