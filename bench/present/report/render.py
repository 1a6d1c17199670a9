"""Build and PNG-encode every figure; large reports use worker processes, one figure each.

Drawing is most of a big report's render time (a 10,000-point report: ~5 of ~9 CPU-seconds)
and the six figures are independent, so they are drawn in parallel on forked workers that
inherit the DataFrames (nothing is pickled but the PNG bytes coming back). Small reports,
platforms without fork, and processes running other threads (fork would copy their locks
mid-use) draw serially; the PNGs are byte-identical either way.
"""

from __future__ import annotations

import multiprocessing
import os
import threading

import pandas as pd

from bench.present.report.html import RenderedFigure, render_figure
from bench.present.report.plots import FIGURES

# Below this many points serial drawing takes a second or two: not worth starting workers.
PARALLEL_MIN_POINTS = 1000

_SHARED: tuple[pd.DataFrame, pd.DataFrame] | None = None


def render_figures(points: pd.DataFrame, scaling: pd.DataFrame, workers: int | None = None) -> list[RenderedFigure]:
    """Every figure that has data, in report order. `workers`: None picks by size and CPUs."""
    workers = _default_workers(len(points)) if workers is None else workers
    if workers > 1 and _can_fork():
        rendered = _render_parallel(points, scaling, workers)
    else:
        rendered = [_render(points, scaling, name) for name in FIGURES]
    return [figure for figure in rendered if figure is not None]


def _render(points: pd.DataFrame, scaling: pd.DataFrame, name: str) -> RenderedFigure | None:
    caption, build = FIGURES[name]
    fig = build(points, scaling)
    return None if fig is None else render_figure(name, caption, fig)


def _render_shared(name: str) -> RenderedFigure | None:
    assert _SHARED is not None, "worker started without data"
    return _render(*_SHARED, name)


def _render_parallel(points: pd.DataFrame, scaling: pd.DataFrame, workers: int) -> list[RenderedFigure | None]:
    global _SHARED
    _SHARED = (points, scaling)
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(FIGURES))) as pool:
            return pool.map(_render_shared, list(FIGURES), chunksize=1)
    finally:
        _SHARED = None


def _default_workers(n_points: int) -> int:
    if n_points < PARALLEL_MIN_POINTS:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
