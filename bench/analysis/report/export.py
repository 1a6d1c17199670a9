"""Tabular exports of the per-point frame: CSV (results.csv) and Parquet.

CSV is flat: list columns (per-step times) are left out. Parquet keeps them as list columns.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.analysis.report.frame import KEY_COLUMNS, LIST_COLUMNS
from bench.schema.files import atomic_path


def write_csv(points: pd.DataFrame, path: Path) -> Path:
    """One row per point, every scalar column; floats written with full precision."""
    path = Path(path)
    with atomic_path(path) as tmp:
        points.drop(columns=[c for c in (*LIST_COLUMNS, *KEY_COLUMNS) if c in points.columns]).to_csv(tmp, index=False)
    return path


def write_parquet(points: pd.DataFrame, path: Path) -> Path:
    """The same rows as Parquet (needs pyarrow: `pip install pyarrow`, part of the dev extra)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ValueError("parquet export needs pyarrow: pip install pyarrow") from None
    path = Path(path)
    frame = points.drop(columns=[c for c in KEY_COLUMNS if c in points.columns])
    for column in LIST_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column].map(lambda values: [float(v) for v in values])
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return path
