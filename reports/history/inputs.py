"""What history.html shows, as plain data (`PageInputs`): the template's context with its tables as
rows of strings, and the series to draw (each one's figure a task of its own where a worker pool
draws them, reports/history/draw.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from bench.analysis.history.analyse import History, SeriesResult
from bench.analysis.history.links import LINK_HEADERS
from bench.analysis.history.series import EFFICIENCY
from reports.history.table import (
    CHANGE_HEADERS,
    NUMERICS_HEADERS,
    SERIES_HEADERS,
    change_row,
    not_gated_line,
    numerics_line,
    numerics_rows,
    series_rows,
    verdict_line,
)

# The series drawn: those with change points or numerics failures first (new regressions first), then
# the longest, at most MAX_PLOTS; the tables list every series and every change. Drawing is most of
# `history`'s time over a big store (docs/results/history.md), and a reader of 1,000 series looks at
# the changed ones, which the change table lists in full.
MAX_PLOTS = 10


@dataclass(frozen=True)
class TableRows:
    """A page table as plain data: headers, rows of strings, which rows are flagged (draw.py makes
    the report's Table of it)."""

    headers: tuple[str, ...]
    rows: list[list[str]]
    flagged: list[bool]


@dataclass(frozen=True)
class PlottedSeries:
    """A series to draw: the file name of its figure, and where on the page it goes."""

    name: str
    result: SeriesResult
    efficiency: bool


@dataclass(frozen=True)
class PageInputs:
    """Everything history.html shows but its figures and the flag rules: the template's context, its
    tables as TableRows, and the series to draw."""

    context: dict[str, Any]
    plotted: list[PlottedSeries]


def _rows(headers: tuple[str, ...], rows: list[list[str]], flagged: list[bool] | None = None) -> TableRows:
    return TableRows(headers, rows, flagged or [False] * len(rows))


def _changes_rows(changes: list) -> TableRows:
    return _rows(CHANGE_HEADERS, [change_row(c) for c in changes], [c.new and c.regression for c in changes])


def _plotted(results: list[SeriesResult]) -> list[SeriesResult]:
    ranked = sorted(
        results, key=lambda r: (not (r.changes or r.numerics), not r.failing, -len(r.series.runs), r.series.label)
    )
    return [r for r in ranked if len(r.series.runs) >= 2][:MAX_PLOTS]


def page_inputs(history: History, *, store: str, command: str) -> PageInputs:
    """What history.html shows, as plain data."""
    plotted = [
        PlottedSeries(f"series{number:03d}", result, result.series.metric == EFFICIENCY)
        for number, result in enumerate(_plotted(history.results), start=1)
    ]
    changes = {
        kind: [c for c in history.changes if (c.series.metric == EFFICIENCY) == (kind == "efficiency")]
        for kind in ("metric", "efficiency")
    }
    context = {
        "title": f"fsdp-bench history: {history.metric}",
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "verdict": verdict_line(history),
        "facts": [
            ("store", store),
            ("metric", history.metric),
            ("detector", history.detector),
            ("gate", f"a change for the worse among the last {history.window} run(s)" if history.window else "off"),
            (
                "target shift",
                f"{history.target_shift * 100:g}% detected with 95% probability, or the series is not gated",
            ),
            ("numerics", numerics_line(history)),
        ],
        "changes": _changes_rows(changes["metric"]),
        "efficiency_changes": _changes_rows(changes["efficiency"]),
        "numerics": _rows(NUMERICS_HEADERS, numerics_rows(history), [n.new for n in history.numerics_issues]),
        "series": _rows(SERIES_HEADERS, series_rows(history), [bool(r.failing) for r in history.results]),
        "max_plots": MAX_PLOTS,
        "links": _rows(LINK_HEADERS, history.links),
        "slow_hosts": history.slow_hosts,
        "too_short": [f"{r.series.label} ({len(r.series.runs)} runs)" for r in history.too_short],
        "not_gated": not_gated_line(history),
        "command": command,
    }
    return PageInputs(context, plotted)
