"""Result records -> one tidy pandas DataFrame, one row per point.

Everything downstream (aggregation, plots, tables, CSV) reads this frame, never the records,
so a new output format needs no knowledge of the record schema. The values come from
columns.py (one list per column, built without pandas: a worker reading a chunk of a folder builds
its chunk's). Missing metrics stay NaN:
a failed point keeps its row (status, error) with empty numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from bench.analysis.report.columns import BREAKDOWN_COLUMNS, METRIC_COLUMNS, PREDICTION_KEYS, frame_columns
from bench.schema.record import RunResult

# Columns that hold one list per row: kept in the frame for plots, left out of CSV.
LIST_COLUMNS = ("step_times_s",)
# The scaling-series keys (bench.analysis.stats.scaling_key): for aggregation only, left out of every export.
KEY_COLUMNS = ("weak_key", "strong_key")


def records_to_frame(records: Iterable[RunResult]) -> pd.DataFrame:
    """One row per point (the latest record per sweep and point id wins)."""
    return frame_of_columns(frame_columns(records))


def frame_of_columns(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """The columns as the frame: numbers as floats, every other column typed as pandas infers a row
    list's; the latest record per (sweep, point id), in SORT_KEYS order."""
    numeric = set(NUMERIC_COLUMNS)
    others = [column for column in COLUMNS if column not in numeric]
    if not columns["sweep"]:  # no records: the frame of an empty row list
        frame = pd.DataFrame.from_records([], columns=COLUMNS)
        return frame.astype(dict.fromkeys(NUMERIC_COLUMNS, float))
    inferred = pd.DataFrame.from_records(list(zip(*(columns[c] for c in others), strict=True)), columns=others)
    frame = pd.DataFrame(
        {column: float_values(columns[column]) if column in numeric else inferred[column] for column in COLUMNS},
        index=inferred.index,
    )
    keys = frame[list(dict.fromkeys(["finished_at", "sweep", "point_id", *SORT_KEYS]))]
    keys = keys.sort_values("finished_at", na_position="first", kind="stable")
    keys = keys.drop_duplicates(["sweep", "point_id"], keep="last")
    order = keys.sort_values(SORT_KEYS, kind="stable").index
    return frame.take(order).reset_index(drop=True)


def float_values(values: list[Any]) -> np.ndarray:
    """A numeric column as floats: numbers (and numeric text, "2") as they are, anything else (None,
    NaN, pd.NA, other text) NaN: pd.to_numeric's coercion."""
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype(float).to_numpy()


SORT_KEYS = ["sweep", "model", "strategy", "precision", "nodes", "gpus_per_node", "per_device_batch", "repeat"]

NUMERIC_COLUMNS = [
    *METRIC_COLUMNS, "tokens_per_step", "wall_s", "device_memory_bytes", "ckpt_every", *PREDICTION_KEYS.values(),
    "preflight_link_gbps", "nominal_link_gbps", "preflight_matmul_tflops", "peak_tflops", "host_load_max",
    *BREAKDOWN_COLUMNS,
]  # fmt: skip


COLUMNS = [
    "sweep", "point_id", "status", "error", "model", "variant", "strategy", "precision", "cluster", "launcher",
    "nodes", "gpus_per_node", "world_size", "micro_batch", "grad_accum", "per_device_batch", "global_batch",
    "seq_len", "activation_checkpointing", "compile", "cpu_offload", "repeat", "steps", "warmup_steps", "params",
    "tokens_per_step", *METRIC_COLUMNS, "device_memory_bytes", "wall_s", "started_at", "finished_at", "torch",
    "cuda", "nccl", "device_name", "device_count", "hostnames", "git_sha", "harness", "exclusive_host", "mfu_note",
    "ckpt_mode", "ckpt_every", *PREDICTION_KEYS.values(), "preflight_link_gbps", "nominal_link_gbps",
    "preflight_matmul_tflops", "peak_tflops", "preflight_stragglers", "host_load_max", "loaded_host",
    "energy_source", "telemetry_sidecar", "energy_note", *BREAKDOWN_COLUMNS, "step_times_s", "weak_key",
    "strong_key",
]  # fmt: skip
