"""The report's main figures as PNGs (`Figures`): each figure one task of a worker pool
(bench/analysis/pool.py) where the report is big enough to pay for one, or drawn here.

Drawing is most of a big report's presentation time and the figures are independent, so each is a
task of its own, submitted as soon as the frame it is drawn from exists: those of the records'
frame (plots.RECORD_FIGURES) while the rest is still aggregated, those of the scaling frame
(plots.SCALING_FIGURES) while each point still gets its series, the rest with the points' frame
(and so are the first two kinds where the pool's first worker was still starting: the same PNGs).
A task gets only the columns a figure may read and returns the figure's PNG (html.py
`render_figure`); this process writes the tables meanwhile and `collect` takes the figures in report
order. Without a pool every figure is drawn here, in report order, at `collect`: the same PNGs. A
figure whose task failed (its worker died, or drawing raised there) is drawn here instead, with a
warning that names the failure; where it fails here too, its error is raised, as without a pool.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING

from bench.analysis.gc_pause import gc_paused
from bench.analysis.pool import result_or_here, starting, submit
from reports.report.html import RenderedFigure

if TYPE_CHECKING:  # the `report` command imports this module before it needs pandas
    import pandas as pd

# Below this many points the figures are drawn here: a pool's start and imports would cost about what it saves.
PARALLEL_MIN_POINTS = 1000
# The modules a figure task imports: a pool's workers load them before their first task (pool.py).
FIGURE_MODULES = ("reports.report.plots", "reports.report.checkpoint", "reports.report.render")
# Columns of the frames that no figure reads (per-cell bootstrap samples, repeats' ids and the series'
# key tuples: most of a big scaling frame's bytes), left out of what a task is sent.
_NOT_DRAWN = ("step_boot", "step_runs", "point_ids", "weak_key", "strong_key")


def pays(points: int) -> bool:
    """Whether a report of this many points draws its figures in a worker pool."""
    return points >= PARALLEL_MIN_POINTS


def figure_names() -> list[str]:
    """Every figure the report may draw, in report order (reports/report/plots.py FIGURES)."""
    from reports.report.plots import FIGURES

    return list(FIGURES)


def draw(points: pd.DataFrame | None, scaling: pd.DataFrame | None, name: str) -> RenderedFigure | None:
    """One figure as PNG, or None when the report has nothing to show for it (a pool's task). Drawn
    without cyclic GC (bench/analysis/gc_pause.py): a figure is one object graph, kept until encoded."""
    from reports.report.html import render_figure
    from reports.report.plots import FIGURES

    caption, build = FIGURES[name]
    with gc_paused():
        fig = build(points, scaling)
        return None if fig is None else render_figure(name, caption, fig)


class Figures:
    """The figures of one report: `records_frame`, `scaling_frame` (optional, as soon as each is
    built), `points_frame`, then `collect`. `pool`: None draws every figure here at `collect`."""

    def __init__(self, pool: Executor | None = None) -> None:
        self._pool = pool
        self._tasks: dict[str, Future | None] = {}
        self._frames: tuple[pd.DataFrame, pd.DataFrame] | None = None

    def records_frame(self, frame: pd.DataFrame) -> None:
        """The records' frame (bench/analysis/report/frame.py, before any aggregation): the figures
        drawn from it alone are submitted (without its step times, which none of them reads)."""
        from bench.analysis.report.frame import LIST_COLUMNS
        from reports.report.plots import RECORD_FIGURES

        self._submit(
            RECORD_FIGURES, frame.drop(columns=[c for c in LIST_COLUMNS if c in frame.columns]), None, early=True
        )

    def scaling_frame(self, scaling: pd.DataFrame) -> None:
        """The scaling frame (bench/analysis/report/aggregate.py): the figures drawn from it alone are
        submitted."""
        from reports.report.plots import SCALING_FIGURES

        self._submit(SCALING_FIGURES, None, scaling, early=True)

    def points_frame(self, points: pd.DataFrame, scaling: pd.DataFrame) -> None:
        """The points' frame and the scaling frame: every figure not submitted yet is."""
        self._frames = (points, scaling)
        self._submit([name for name in figure_names() if name not in self._tasks], points, scaling)

    def _submit(self, names, points: pd.DataFrame | None, scaling: pd.DataFrame | None, early: bool = False) -> None:
        """Submit the figures `names`; `early` ones not while the pool's first worker is still starting
        (a task given to it would wait for that, and so would this process): they are submitted with
        the points' frame then."""
        if self._pool is None or (early and starting(self._pool)):
            return
        points, scaling = _drawn_columns(points), _drawn_columns(scaling)
        for name in names:
            self._tasks[name] = submit(self._pool, draw, points, scaling, name)

    def collect(self) -> list[RenderedFigure]:
        """Every figure that has data, in report order (waits for the tasks)."""
        if self._frames is None:
            raise RuntimeError("Figures.collect before points_frame")
        points, scaling = self._frames
        figures = []
        for name in figure_names():
            here = lambda name=name: draw(points, scaling, name)  # noqa: E731
            if name in self._tasks:
                figure = result_or_here(self._tasks[name], here, f"drawing the {name} figure")
            else:
                figure = here()
            if figure is not None:
                figures.append(figure)
        return figures


def render_figures(points: pd.DataFrame, scaling: pd.DataFrame, pool: Executor | None = None) -> list[RenderedFigure]:
    """Every figure that has data, in report order, each a task of `pool` (None: drawn here)."""
    figures = Figures(pool)
    figures.points_frame(points, scaling)
    return figures.collect()


def _drawn_columns(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The frame without the columns no figure reads (_NOT_DRAWN)."""
    if frame is None:
        return None
    return frame.drop(columns=[c for c in _NOT_DRAWN if c in frame.columns])
