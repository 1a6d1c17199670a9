"""write_history: OUT/history.html (self-contained, like the report) + one PNG per series +
OUT/summary.md + OUT/history.xml (JUnit).

The page reuses the report's building blocks: bench/present/report/html.py (PNG encoding, data URIs, Jinja2 with
autoescaping), its table macro and Table, and bench/present/report/plots.py's palette.

This module is light on purpose (no matplotlib, pandas or Jinja2): it gathers what the page shows as
plain data (`PageInputs`), and bench/present/history/draw.py, which imports the drawing libraries,
draws the figures and renders the page from it, in a process the command starts before it loads the
store (bench/present/history/drawing.py) or here where that cannot run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.analysis.history.analyse import History, SeriesResult
from bench.analysis.history.build import HistoryQuery
from bench.analysis.history.links import LINK_HEADERS
from bench.analysis.history.series import EFFICIENCY
from bench.present.history.outputs import write_history_junit, write_summary
from bench.present.history.table import (
    CHANGE_HEADERS,
    NUMERICS_HEADERS,
    SERIES_HEADERS,
    change_row,
    numerics_line,
    numerics_rows,
    series_rows,
    verdict_line,
)
from bench.schema.files import write_bytes_atomic, write_text_atomic

# The series drawn: those with change points or numerics failures first (new regressions first), then
# the longest, at most MAX_PLOTS; the tables list every series and every change. A plot costs about a
# quarter of a second of CPU: 60 of them were two thirds of `history` over a 1,000-series store
# (docs/results/history.md), and a reader of 1,000 series looks at the changed ones, which the change
# table lists in full.
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
    """What history.html shows, as plain data (what the drawing process receives)."""
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
            ("numerics", numerics_line(history)),
        ],
        "changes": _changes_rows(changes["metric"]),
        "efficiency_changes": _changes_rows(changes["efficiency"]),
        "numerics": _rows(NUMERICS_HEADERS, numerics_rows(history), [n.new for n in history.numerics_issues]),
        "series": _rows(SERIES_HEADERS, series_rows(history), [bool(r.failing) for r in history.results]),
        "max_plots": MAX_PLOTS,
        "links": _rows(LINK_HEADERS, history.links),
        "too_short": [f"{r.series.label} ({len(r.series.runs)} runs)" for r in history.too_short],
        "command": command,
    }
    return PageInputs(context, plotted)


def write_history(history: History, out: Path, *, store: str, command: str, drawing=None) -> Path:
    """Write every output of `history` into `out`; returns the path of history.html. `drawing`: the
    process that draws the page (bench/present/history/drawing.py), started early; None draws here.
    summary.md and history.xml are written while the figures are drawn."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = page_inputs(history, store=store, command=command)
    if drawing is not None:
        drawing.send(inputs)
    write_summary(history, out / "summary.md", store=store)
    write_history_junit(history, out / "history.xml")
    if drawing is not None:
        figures, html = drawing.receive()
    else:
        from bench.present.history.draw import render_page

        figures, html = render_page(inputs)
    for name, png in figures:
        write_bytes_atomic(out / name, png)
    page = out / "history.html"
    write_text_atomic(page, html)
    return page


def reproduce_command(query: HistoryQuery, out: Path) -> str:
    """The command line that makes this page again (shown on it)."""
    words = ["fsdp-bench", "history", "--store", str(query.store), "--metric", query.metric, "-o", str(out)]
    for flag, value in (("--since", query.since), ("--series", query.series)):
        words += [flag, value] if value else []
    if query.window is not None:
        words += ["--fail-on-new-regression", str(query.window)]
    words += ["--no-numerics"] if not query.numerics else ["--loss-rtol", f"{query.loss_rtol:g}"]
    return shlex.join(words)
