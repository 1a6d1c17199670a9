"""Records -> the aggregated views every output is built from (no plotting imports here)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from bench.analysis.report.aggregate import build_cells, build_scaling, point_scaling
from bench.analysis.report.frame import records_to_frame
from bench.schema.record import RunResult


@dataclass(frozen=True)
class Analysis:
    """points: one row per point with its efficiency; cells: one per configuration and node
    count (repeats pooled); scaling: one row per (series, node count)."""

    points: pd.DataFrame
    cells: pd.DataFrame
    scaling: pd.DataFrame


def analyse(records: Iterable[RunResult]) -> Analysis:
    """Records -> per-point frame with efficiencies, per-configuration cells, scaling series."""
    frame = records_to_frame(records)
    cells = build_cells(frame)
    scaling = build_scaling(cells)
    return Analysis(point_scaling(frame, cells, scaling), cells, scaling)
