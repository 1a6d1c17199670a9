"""Tabular exports of the per-point frame: CSV (results.csv) and Parquet.

CSV is flat: list columns (per-step times) are left out. Parquet keeps them as list columns.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from bench.analysis.report.frame import KEY_COLUMNS, LIST_COLUMNS
from bench.schema.files import atomic_path


def write_csv(points: pd.DataFrame, path: Path) -> Path:
    """One row per point, every scalar column; floats written with full precision.

    The bytes `DataFrame.to_csv(index=False)` writes, for less: pandas formats
    float columns with numpy's `str` (slow for the many floats of a big report) and hands the
    rest to the csv module; here the csv module formats every value itself, floats with `repr`,
    which spells every float64 the same as numpy's `str` (both shortest round-trip, the same
    switch to exponent notation); missing values are empty cells, as pandas writes them.
    """
    path = Path(path)
    names = csv_columns(points)
    frame = points[names]
    if not all(_csv_plain(frame[name]) for name in names):  # dates, categories...: pandas formats them
        with atomic_path(path) as tmp:
            frame.to_csv(tmp, index=False)
        return path
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([str(name) for name in names])
        writer.writerows(zip(*(_csv_cells(frame[name]) for name in names)))
    return path


def csv_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of `frame` that results.csv writes, in the frame's order (list and key columns left out)."""
    return [c for c in frame.columns if c not in LIST_COLUMNS and c not in KEY_COLUMNS]


def _csv_plain(column: pd.Series) -> bool:
    """Numbers, booleans, strings and Python objects: the kinds whose cells pandas leaves to the csv module
    (or, for floats, spells as `repr` does)."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype):
        return dtype.kind in "fiubO"
    return isinstance(dtype, pd.StringDtype) or (dtype.kind in "fiub" and not isinstance(dtype, pd.SparseDtype))


def _csv_cells(column: pd.Series) -> list:
    """A column as Python objects (numpy floats and ints become Python ones), None where missing."""
    values = column.to_numpy(dtype=object, copy=True)
    values[column.isna().to_numpy()] = None
    return values.tolist()


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
