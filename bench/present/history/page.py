"""write_history: OUT/history.html (self-contained, like the report) + one PNG per series +
OUT/summary.md + OUT/history.xml (JUnit).

The page reuses the report's building blocks: bench/present/report/html.py (PNG encoding, data URIs, Jinja2 with
autoescaping), its table macro and Table, and bench/present/report/plots.py's palette.
"""

from __future__ import annotations

import shlex
from datetime import datetime, timezone
from pathlib import Path

from bench.analysis.history.analyse import History, SeriesResult
from bench.analysis.history.build import HistoryQuery
from bench.analysis.history.links import LINK_HEADERS
from bench.analysis.history.series import EFFICIENCY
from bench.present.history.outputs import write_history_junit, write_summary
from bench.present.history.plots import series_figure
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
from bench.present.report.flag_rules import flag_rules
from bench.present.report.html import render_figure, render_html
from bench.present.report.tables import Table
from bench.schema.files import write_bytes_atomic, write_text_atomic

# The series drawn: those with change points or numerics failures first (new regressions first), then
# the longest, at most MAX_PLOTS; the tables list every series and every change. A plot costs about a
# quarter of a second of CPU: 60 of them were two thirds of `history` over a 1,000-series store
# (docs/results/history.md), and a reader of 1,000 series looks at the changed ones, which the change
# table lists in full.
MAX_PLOTS = 10


def _table(headers: tuple[str, ...], rows: list[list[str]], flagged: list[bool] | None = None) -> Table:
    table = Table(list(headers))
    for row, flag in zip(rows, flagged or [False] * len(rows)):
        table.add(row, "flag" if flag else "")
    return table


def _changes_table(changes: list) -> Table:
    return _table(CHANGE_HEADERS, [change_row(c) for c in changes], [c.new and c.regression for c in changes])


def _plotted(results: list[SeriesResult]) -> list[SeriesResult]:
    ranked = sorted(
        results, key=lambda r: (not (r.changes or r.numerics), not r.failing, -len(r.series.runs), r.series.label)
    )
    return [r for r in ranked if len(r.series.runs) >= 2][:MAX_PLOTS]


def write_history(history: History, out: Path, *, store: str, command: str) -> Path:
    """Write every output of `history` into `out`; returns the path of history.html."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures = {"metric": [], "efficiency": []}
    for number, result in enumerate(_plotted(history.results), start=1):
        figure = render_figure(f"series{number:03d}", result.series.label, series_figure(result))
        write_bytes_atomic(out / f"{figure.name}.png", figure.png)
        figures["efficiency" if result.series.metric == EFFICIENCY else "metric"].append(figure)
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
        "changes": _changes_table(changes["metric"]),
        "efficiency_changes": _changes_table(changes["efficiency"]),
        "numerics": _table(NUMERICS_HEADERS, numerics_rows(history), [n.new for n in history.numerics_issues]),
        "series": _table(SERIES_HEADERS, series_rows(history), [bool(r.failing) for r in history.results]),
        "figures": figures["metric"],
        "max_plots": MAX_PLOTS,
        "efficiency_figures": figures["efficiency"],
        "links": _table(LINK_HEADERS, history.links),
        "too_short": [f"{r.series.label} ({len(r.series.runs)} runs)" for r in history.too_short],
        "command": command,
        "rules": flag_rules(),
    }
    page = out / "history.html"
    write_text_atomic(page, render_html(context, "history.html.j2"))
    write_summary(history, out / "summary.md", store=store)
    write_history_junit(history, out / "history.xml")
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
