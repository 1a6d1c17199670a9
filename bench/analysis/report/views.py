"""Records -> the aggregated views every output is built from (no plotting imports here)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.analysis.report.aggregate import build_cells, build_scaling, point_scaling
from bench.analysis.report.columns import frame_columns
from bench.analysis.report.frame import frame_of_columns
from bench.schema.record import RunResult


@dataclass(frozen=True)
class Analysis:
    """points: one row per point with its efficiency; cells: one per configuration and node
    count (repeats pooled); scaling: one row per (series, node count)."""

    points: pd.DataFrame
    cells: pd.DataFrame
    scaling: pd.DataFrame


def analyse(
    records: Iterable[RunResult],
    on_frame: Callable[[pd.DataFrame], None] | None = None,
    on_scaling: Callable[[pd.DataFrame], None] | None = None,
) -> Analysis:
    """Records -> per-point frame with efficiencies, per-configuration cells, scaling series.

    `on_frame`: called with the records' frame as soon as it is built, before the aggregation (the
    report's worker pool draws the figures that need nothing more meanwhile); `on_scaling` likewise
    with the scaling frame (analyse_columns)."""
    return analyse_columns(frame_columns(records), on_frame, on_scaling)


def analyse_columns(
    columns: dict[str, list[Any]],
    on_frame: Callable[[pd.DataFrame], None] | None = None,
    on_scaling: Callable[[pd.DataFrame], None] | None = None,
) -> Analysis:
    """`analyse` of the records whose frame columns these are (bench/analysis/report/columns.py).

    `on_scaling`: called with the scaling frame as soon as it is built, before each point gets its
    series (the report's worker pool draws the scaling figures from it meanwhile)."""
    frame = frame_of_columns(columns)
    if on_frame is not None:
        on_frame(frame)
    cells = build_cells(frame)
    scaling = build_scaling(cells)
    if on_scaling is not None:
        on_scaling(scaling)
    return Analysis(point_scaling(frame, cells, scaling), cells, scaling)
