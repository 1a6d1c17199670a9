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


def write_csv(points: pd.DataFrame, path: Path, leading: CsvRows | None = None) -> Path:
    """One row per point, every scalar column; floats written with full precision.

    The bytes `DataFrame.to_csv(index=False)` writes, at about a third of its cost: pandas formats
    float columns with numpy's `str` (slow for ~600,000 floats at 10,000 points) and hands the
    rest to the csv module; here the csv module formats every value itself, floats with `repr`,
    which spells every float64 the same as numpy's `str` (both shortest round-trip, the same
    switch to exponent notation); missing values are empty cells, as pandas writes them.

    `leading`: `csv_rows` of the frame `points` was built from (the same rows, its columns the first
    of `points`: the report's figure worker formats them while this process still aggregates,
    reports/report/render.py), so that only the columns after them are formatted here; ignored
    where they are not those (the whole row is formatted then). A row is its columns' cells joined
    by commas, each cell quoted or not by its own text alone: a row's two parts joined by a comma are
    the row.
    """
    path = Path(path)
    names = csv_columns(points)
    frame = points[names]
    if not all(_csv_plain(frame[name]) for name in names):  # dates, categories...: pandas formats them
        with atomic_path(path) as tmp:
            frame.to_csv(tmp, index=False)
        return path
    if leading is not None and _leads(leading, frame):
        lines = _joined(leading[1], _row_texts(frame, names[len(leading[0]) :]))
    else:
        lines = _row_texts(frame, names)
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as handle:
        handle.write(_line([str(name) for name in names]))
        handle.writelines(lines)
    return path


# `csv_rows`' result: the columns, in results.csv's order, and each row's line for them (with its end).
CsvRows = tuple[list[str], list[str]]


def csv_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of `frame` that results.csv writes, in the frame's order (list and key columns left out)."""
    return [c for c in frame.columns if c not in LIST_COLUMNS and c not in KEY_COLUMNS]


def csv_rows(frame: pd.DataFrame) -> CsvRows | None:
    """`frame`'s results.csv columns and each row's line for them, as write_csv writes them (None where
    pandas would format one of them: write_csv leaves those to pandas, whole)."""
    names = csv_columns(frame)
    if not all(_csv_plain(frame[name]) for name in names):
        return None
    return names, _row_texts(frame, names)


def _leads(leading: CsvRows, frame: pd.DataFrame) -> bool:
    """`leading` is the first columns of `frame`'s rows, and a row's two parts each a row of two or more
    cells or none (the csv module writes a row of one empty cell as `""`, not as nothing)."""
    names, lines = leading
    rest = len(frame.columns) - len(names)
    return (
        list(frame.columns[: len(names)]) == list(names)
        and len(lines) == len(frame)
        and len(names) >= 2
        and (rest == 0 or rest >= 2)
    )


def _joined(heads: list[str], tails: list[str]) -> list[str]:
    """Each row's line from its leading part's line and the rest's (none: no column after the leading ones)."""
    if not tails:
        return heads
    return [f"{head[:-1]},{tail}" for head, tail in zip(heads, tails, strict=True)]


def _row_texts(frame: pd.DataFrame, names: list[str]) -> list[str]:
    """Each row's line (cells of these columns, with its end) as the csv module writes it to a file: it
    writes a row in one call of the file's `write`, here a list's append."""
    lines: list[str] = []
    if names:
        writer = csv.writer(_Lines(lines.append), lineterminator="\n")
        writer.writerows(zip(*(_csv_cells(frame[name]) for name in names)))
    return lines


def _line(cells: list[str]) -> str:
    lines: list[str] = []
    csv.writer(_Lines(lines.append), lineterminator="\n").writerow(cells)
    return lines[0]


class _Lines:
    """A file as the csv module sees one (something with `write`), each line passed on to `write`."""

    def __init__(self, write) -> None:
        self.write = write


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
