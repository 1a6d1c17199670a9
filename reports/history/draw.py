"""The drawn half of history.html: every plotted series' figure PNG-encoded (`SeriesFigures`), and
the page rendered from reports/history/inputs.py's PageInputs (`render_page`: the report's Jinja2
template helpers and Table).

The figures are independent: given a worker pool (bench/analysis/pool.py) and PARALLEL_MIN_PLOTS or
more, each is a task of its own (its series in, its PNG out), drawn while the command writes the
other outputs; otherwise, or where a task failed, they are drawn here. The PNGs are the same either
way. matplotlib is imported where a figure is drawn, not with this module.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future

from bench.analysis.pool import result_or_here, submit
from reports.history.inputs import PageInputs, PlottedSeries, TableRows
from reports.report.flag_rules import flag_rules
from reports.report.html import RenderedFigure, render_html
from reports.report.table import Table

# Fewer plots than this are drawn here: a pool's tasks would cost about what drawing two or three saves.
PARALLEL_MIN_PLOTS = 4
# What a figure task imports: a pool's workers load it before their first task.
DRAWING_MODULES = ("reports.history.plots",)


class SeriesFigures:
    """The plotted series' figures: submitted to `pool` at once where it pays, `collect`ed in order."""

    def __init__(self, plotted: list[PlottedSeries], pool: Executor | None = None) -> None:
        self._plotted = plotted
        self._tasks: list[Future | None] = []
        if pool is not None and len(plotted) >= PARALLEL_MIN_PLOTS:
            self._tasks = [submit(pool, draw, p) for p in plotted]

    def collect(self) -> list[RenderedFigure]:
        """Every plotted series' figure, in order (a failed task's drawn here)."""
        if not self._tasks:
            return [draw(p) for p in self._plotted]
        return [
            result_or_here(task, lambda p=p: draw(p), f"drawing the {p.name} figure")
            for task, p in zip(self._tasks, self._plotted, strict=True)
        ]


def draw(plotted: PlottedSeries) -> RenderedFigure:
    """One series' figure as PNG (a pool's task)."""
    from reports.history.plots import series_figure
    from reports.report.html import render_figure

    return render_figure(plotted.name, plotted.result.series.label, series_figure(plotted.result))


def render_page(inputs: PageInputs, figures: list[RenderedFigure]) -> str:
    """history.html's text, with the plotted series' figures (in the order of `inputs.plotted`)."""
    context = {key: _table(value) if isinstance(value, TableRows) else value for key, value in inputs.context.items()}
    context["figures"] = [f for f, p in zip(figures, inputs.plotted, strict=True) if not p.efficiency]
    context["efficiency_figures"] = [f for f, p in zip(figures, inputs.plotted, strict=True) if p.efficiency]
    context["rules"] = flag_rules()
    return render_html(context, "history.html.j2")


def _table(rows: TableRows) -> Table:
    table = Table(list(rows.headers))
    for row, flag in zip(rows.rows, rows.flagged, strict=True):
        table.add(row, "flag" if flag else "")
    return table
