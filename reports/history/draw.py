"""The drawn half of history.html: every plotted series' figure PNG-encoded, and the page rendered
from reports/history/inputs.py's PageInputs (the report's Jinja2 template helpers and Table).

The figures are independent and drawing is most of this module's time (a plot is ~0.15 s of CPU),
so with PARALLEL_MIN_PLOTS or more they are drawn on forked workers, one per CPU, that inherit the
inputs (only the PNG bytes come back), as the report's figures are (reports/report/render.py);
platforms without fork and processes running other threads draw serially. The PNGs are
byte-identical either way.
"""

from __future__ import annotations

import multiprocessing

from bench.analysis.forking import can_fork, cpus
from reports.history.inputs import PageInputs, PlottedSeries, TableRows
from reports.history.plots import series_figure
from reports.report.flag_rules import flag_rules
from reports.report.html import RenderedFigure, render_figure, render_html
from reports.report.table import Table

# Fewer plots than this draw serially: starting workers costs about what drawing two or three saves.
PARALLEL_MIN_PLOTS = 4

_SHARED: list[PlottedSeries] | None = None


def render_page(inputs: PageInputs) -> tuple[list[tuple[str, bytes]], str]:
    """The (file name, PNG bytes) of each plotted series' figure, in order, and history.html's text:
    plain values, so the command that receives them imports none of the drawing libraries."""
    figures = _draw_all(inputs.plotted)
    context = {key: _table(value) if isinstance(value, TableRows) else value for key, value in inputs.context.items()}
    context["figures"] = [f for f, p in zip(figures, inputs.plotted, strict=True) if not p.efficiency]
    context["efficiency_figures"] = [f for f, p in zip(figures, inputs.plotted, strict=True) if p.efficiency]
    context["rules"] = flag_rules()
    return [(f"{f.name}.png", f.png) for f in figures], render_html(context, "history.html.j2")


def _table(rows: TableRows) -> Table:
    table = Table(list(rows.headers))
    for row, flag in zip(rows.rows, rows.flagged, strict=True):
        table.add(row, "flag" if flag else "")
    return table


def _draw(plotted: PlottedSeries) -> RenderedFigure:
    return render_figure(plotted.name, plotted.result.series.label, series_figure(plotted.result))


def _draw_shared(index: int) -> RenderedFigure:
    assert _SHARED is not None, "worker started without the series"
    return _draw(_SHARED[index])


def _draw_all(plotted: list[PlottedSeries]) -> list[RenderedFigure]:
    global _SHARED
    workers = min(cpus(), len(plotted))
    if len(plotted) < PARALLEL_MIN_PLOTS or workers < 2 or not can_fork():
        return [_draw(p) for p in plotted]
    _SHARED = plotted
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_draw_shared, range(len(plotted)), chunksize=1)
    finally:
        _SHARED = None
