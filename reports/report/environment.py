"""The report header's environment lines: software versions, devices, hosts, dates.

Every distinct value is shown (a sweep run across two torch versions says so, instead of
quietly picking one), up to MAX_VALUES per line.
"""

from __future__ import annotations

import pandas as pd

from bench.schema.base import STATUSES
from reports.report.formatting import MISSING

# Beyond this many distinct hosts or versions a line is summarised with a count.
MAX_VALUES = 12


def environment_lines(points: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, value) pairs for the header, in a fixed order."""
    hosts = sorted({h for names in _values(points["hostnames"]) for h in str(names).split()})
    return [
        ("sweeps", _distinct(points["sweep"])),
        ("torch", _distinct(points["torch"])),
        ("CUDA", _distinct(points["cuda"])),
        ("NCCL", _distinct(points["nccl"])),
        ("devices", _devices(points)),
        ("hosts", _join(hosts)),
        ("git", _distinct(points["git_sha"])),
        ("fsdp-bench", _distinct(points["harness"])),
        ("runs", _date_range(points)),
        ("points", _status_counts(points)),
    ]


def _distinct(column: pd.Series) -> str:
    return _join(sorted({str(v) for v in _values(column) if str(v)}))


def _values(column: pd.Series):
    """The column's values without the missing ones, each distinct string once (10,000 points have a
    handful); every value where some are not strings (equal values of other types, 1 and 1.0, print apart)."""
    present = column.dropna()
    distinct = present.unique()
    return distinct if all(type(v) is str for v in distinct) else present


def _join(values: list[str]) -> str:
    if not values:
        return MISSING
    shown = ", ".join(values[:MAX_VALUES])
    return shown if len(values) <= MAX_VALUES else f"{shown} and {len(values) - MAX_VALUES} more"


def _devices(points: pd.DataFrame) -> str:
    """Device names with the largest world size each ran at ("NVIDIA H200, up to 64 ranks")."""
    named = points[points["device_name"].notna()]
    if named.empty:
        return MISSING
    widest = named.groupby("device_name")["world_size"].max()
    return _join([f"{name} (up to {int(ranks)} rank{'s' if ranks > 1 else ''})" for name, ranks in widest.items()])


def _date_range(points: pd.DataFrame) -> str:
    starts, ends = points["started_at"].dropna(), points["finished_at"].dropna()
    if starts.empty and ends.empty:
        return MISSING
    first = min(starts) if not starts.empty else min(ends)
    last = max(ends) if not ends.empty else max(starts)
    return f"{first} to {last}"


def _status_counts(points: pd.DataFrame) -> str:
    counts = points["status"].value_counts()
    ordered = [s for s in STATUSES if s in counts] + sorted(set(counts.index) - set(STATUSES))
    return ", ".join(f"{int(counts[status])} {status}" for status in ordered)
