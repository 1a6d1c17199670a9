"""The parent-to-rank protocol: the files a launch shares between bench (the parent) and the ranks.

Torch-free and dependency-free: bench's launchers and the worker both read the names and rules
from here, so neither side can drift from the other.

    <results>/<sweep>/_launches/<stamp>/launch.json   parent -> ranks: the points to run
    <results>/<sweep>/<point_id>/started              rank 0, when the point starts (its timeout runs from here)
    <results>/<sweep>/<point_id>/result.json          rank 0 (or the parent, for a failure): the record
    <results>/<sweep>/<point_id>/errors/rank<R>.json  rank R, when it fails: a one-line reason
"""

from __future__ import annotations

from pathlib import Path

LAUNCH_FILE = "launch.json"
STARTED_MARK = "started"
RESULT_FILE = "result.json"
ERRORS_DIR = "errors"
# The process groups' collective timeout outlasts the point timeout by this much, so the launcher's
# watch always ends a hang first (status `timeout`); otherwise a peer's collective timeout could
# win the race and the point would read as `failed` with a secondary "timed out" message.
PG_TIMEOUT_MARGIN_S = 60.0


def error_file(point_dir: Path, rank: int) -> Path:
    """Where rank `rank` leaves its one-line reason when it fails."""
    return Path(point_dir) / ERRORS_DIR / f"rank{rank}.json"


def error_files(point_dir: Path) -> list[Path]:
    """Every rank's error file of a point, in rank order."""
    return sorted((Path(point_dir) / ERRORS_DIR).glob("rank*.json"), key=lambda p: int(p.stem[4:]))


def collective_timeout_s(point_timeout_s: float) -> float:
    """The process groups' timeout for a point: its own timeout plus the margin."""
    return float(point_timeout_s) + PG_TIMEOUT_MARGIN_S
