"""Scaling arithmetic: configurations (cells), scaling series, efficiency and speedup.

A *cell* is one configuration at one node count; repeats of a point (spec.repeat) pool into
it. A *series* is the set of cells that differ only in node count:
- weak scaling: the per-device batch (micro_batch x grad_accum) is fixed, so the global batch
  grows with the nodes (the usual benchmark);
- strong scaling: the global batch (world_size x micro_batch x grad_accum) is fixed, so each
  device gets less work as nodes grow.
Scaling efficiency at N = (tokens/s at N / tokens/s at the baseline) / (N / baseline), where
the baseline is the series' smallest node count (DESIGN section 5).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from reports.diagnosis import FLAG_POINTS
from reports.stats import percentile_bounds, resampled_medians

# What must match for two points to be compared at all: everything but nodes, batch and repeat.
GROUP_KEYS = [
    "sweep", "model", "variant", "strategy", "precision", "cluster", "seq_len", "gpus_per_node",
    "activation_checkpointing", "compile", "cpu_offload",
]  # fmt: skip
# One configuration at one node count; repeats (spec.repeat) are pooled into it.
CELL_KEYS = [*GROUP_KEYS, "micro_batch", "grad_accum", "nodes"]
WEAK_KEYS = [*GROUP_KEYS, "micro_batch", "grad_accum"]
STRONG_KEYS = [*GROUP_KEYS, "global_batch"]

# A point is flagged when its measured efficiency is this far below the planner's prediction
# (a fraction: 0.10 = 10 percentage points; the threshold itself lives in reports/diagnosis.py).
PREDICTION_TOLERANCE = FLAG_POINTS / 100

_MEDIAN_COLUMNS = ["step_time_median_s", "mfu", "pred_tokens_per_s_per_device", "pred_scaling_efficiency",
                   "pred_step_time_s", "pred_memory_bytes"]  # fmt: skip
_CELL_COLUMNS = [
    *CELL_KEYS, "per_device_batch", "global_batch", "world_size", "repeats", "point_ids", "tps_samples", "tps_boot",
    "tokens_per_s", "tps_ci_low", "tps_ci_high", "tokens_per_s_per_device", "tpsd_ci_low", "tpsd_ci_high",
    *_MEDIAN_COLUMNS, "peak_mem_bytes", "device_memory_bytes",
]  # fmt: skip
_SCALING_COLUMNS = [*_CELL_COLUMNS, "cell", "series", "mode", "baseline_nodes", "speedup", "scaling_efficiency",
                    "eff_ci_low", "eff_ci_high", "below_prediction"]  # fmt: skip


def ok_points(frame: pd.DataFrame) -> pd.Series:
    """Rows that measured a throughput (status ok): the only ones that enter the scaling."""
    return (frame["status"] == "ok") & frame["tokens_per_s"].notna()


def build_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and node count over the ok points: medians and 95 % CIs.

    Vectorised (groupby aggregations, one numpy pass for the samples): a 10,000-point report
    has thousands of cells, and per-group pandas calls would dominate its render time.
    """
    ok = frame[ok_points(frame)].reset_index(drop=True)
    if ok.empty:
        return pd.DataFrame(columns=_CELL_COLUMNS).rename_axis("cell")
    grouped = ok.groupby(CELL_KEYS, sort=True, dropna=False)
    firsts = {c: (c, "first") for c in ("per_device_batch", "global_batch", "world_size")}
    medians = {c: (c, "median") for c in ("tokens_per_s", "tokens_per_s_per_device", *_MEDIAN_COLUMNS)}
    maxima = {c: (c, "max") for c in ("peak_mem_bytes", "device_memory_bytes")}
    cells = grouped.agg(repeats=("point_id", "size"), **firsts, **medians, **maxima).reset_index()
    positions = _group_positions(grouped.ngroup().to_numpy(), len(cells))
    tps = ok["tokens_per_s"].to_numpy(float)
    point_ids = ok["point_id"].to_numpy(object)
    cells["point_ids"] = [list(point_ids[p]) for p in positions]
    cells["tps_samples"] = [tps[p] for p in positions]
    cells["tps_boot"] = list(_add_ci(cells, "tps", cells["tps_samples"]))
    # tokens/s per device is tokens/s over the (fixed) world size of the cell: so is its interval.
    cells["tpsd_ci_low"] = cells["tps_ci_low"] / cells["world_size"]
    cells["tpsd_ci_high"] = cells["tps_ci_high"] / cells["world_size"]
    return cells[_CELL_COLUMNS].rename_axis("cell")


def _group_positions(group_ids: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Row positions of each group, in group order (one argsort instead of a loop over groups)."""
    order = np.argsort(group_ids, kind="stable")
    return np.split(order, np.cumsum(np.bincount(group_ids, minlength=n_groups))[:-1])


def _add_ci(cells: pd.DataFrame, prefix: str, samples: Sequence[np.ndarray]) -> np.ndarray:
    """95 % bootstrap bounds of the median where a cell has repeats (NaN otherwise).

    Returns the resampled medians (cells x N_BOOT), reused for the efficiency intervals.
    """
    boot = resampled_medians(samples)
    low, high = percentile_bounds(boot)
    repeated = np.array([len(s) > 1 for s in samples], dtype=bool)
    cells[f"{prefix}_ci_low"] = np.where(repeated, low, np.nan)
    cells[f"{prefix}_ci_high"] = np.where(repeated, high, np.nan)
    return boot


def build_scaling(cells: pd.DataFrame) -> pd.DataFrame:
    """Every scaling series, one row per (series, node count), with efficiency, speedup and CIs.

    Weak series come first. A strong series is kept only when it scales cells no weak series
    covers (otherwise a weak sweep over two batch sizes would sprout spurious strong series).
    Cells in no series of two or more node counts form "single" series with no efficiency.
    """
    weak = _series(cells, WEAK_KEYS, "weak")
    covered = set(weak["cell"])
    strong = _series(cells, STRONG_KEYS, "strong")
    strong = strong[strong["series"].isin(strong.loc[~strong["cell"].isin(covered), "series"])]
    covered |= set(strong["cell"])
    single = _series(cells[~cells.index.isin(covered)], WEAK_KEYS, "single")
    parts = [part for part in (weak, strong, single) if len(part)]
    if not parts:
        return pd.DataFrame(columns=_SCALING_COLUMNS)
    scaling = pd.concat(parts, ignore_index=True)
    scaling["series"] = pd.factorize(scaling["mode"] + "|" + scaling["series"].astype(str))[0]
    return scaling[_SCALING_COLUMNS]


def _series(cells: pd.DataFrame, keys: Sequence[str], mode: str) -> pd.DataFrame:
    """Cells grouped into series by `keys`; `mode` is "weak", "strong" or "single"."""
    if cells.empty:
        return pd.DataFrame(columns=[*_CELL_COLUMNS, "cell", "series"])
    data = cells.reset_index()
    data["series"] = data.groupby(list(keys), sort=True, dropna=False).ngroup()
    # Strong series may hold several batch splits at one node count: keep the fastest.
    data = data.sort_values("tokens_per_s").drop_duplicates(["series", "nodes"], keep="last")
    spans = data.groupby("series")["nodes"].transform("size")
    data = data[(spans < 2) if mode == "single" else (spans >= 2)].sort_values(["series", "nodes"])
    return _with_efficiency(data.reset_index(drop=True), mode)


def _with_efficiency(data: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Speedup and efficiency against each series' first (smallest) node count, vectorised."""
    base = data.groupby("series")[["nodes", "tokens_per_s", "cell"]].transform("first")
    data = data.assign(mode=mode, baseline_nodes=base["nodes"])
    scale = data["nodes"] / base["nodes"]
    data["speedup"] = data["tokens_per_s"] / base["tokens_per_s"]
    data["scaling_efficiency"] = data["speedup"] / scale
    data["eff_ci_low"], data["eff_ci_high"] = np.nan, np.nan
    if mode == "single":
        data[["speedup", "scaling_efficiency"]] = np.nan
    else:
        _add_efficiency_ci(data, base["cell"], scale)
    data["below_prediction"] = below_prediction(data["scaling_efficiency"], data["pred_scaling_efficiency"])
    return data


def _add_efficiency_ci(data: pd.DataFrame, base_cell: pd.Series, scale: pd.Series) -> None:
    """Bootstrap bounds where either side has repeats; none at the baseline (1 by definition).

    Reuses each cell's resampled medians: numerator and denominator were drawn independently.
    """
    boots = dict(zip(data["cell"], data["tps_boot"], strict=True))
    repeats = dict(zip(data["cell"], data["repeats"], strict=True))
    base_repeats = base_cell.map(repeats)
    mask = (data["cell"] != base_cell) & ((data["repeats"] > 1) | (base_repeats > 1))
    if not mask.any():
        return
    own = np.vstack(list(data.loc[mask, "tps_boot"]))
    base = np.vstack([boots[c] for c in base_cell[mask]])
    low, high = percentile_bounds(own / base / scale[mask].to_numpy(dtype=float)[:, None])
    data.loc[mask, "eff_ci_low"], data.loc[mask, "eff_ci_high"] = low, high


def below_prediction(measured: pd.Series, predicted: pd.Series) -> pd.Series:
    """True where measured efficiency is more than PREDICTION_TOLERANCE below the prediction."""
    return (measured < predicted - PREDICTION_TOLERANCE) & measured.notna() & predicted.notna()


def point_scaling(frame: pd.DataFrame, cells: pd.DataFrame, scaling: pd.DataFrame) -> pd.DataFrame:
    """The frame with each point's series, mode, baseline, efficiency and speedup (weak preferred).

    A point's own tokens/s is compared with the median of its baseline cell, so repeats each
    get their own efficiency while sharing one baseline.
    """
    primary = scaling.drop_duplicates("cell", keep="first").set_index("cell")
    base_tps = scaling[scaling["nodes"] == scaling["baseline_nodes"]].groupby("series")["tokens_per_s"].first()
    cell_ids = cells[CELL_KEYS].reset_index()
    cell_of = frame[CELL_KEYS].merge(cell_ids, on=CELL_KEYS, how="left")["cell"]
    cell_of = cell_of.where(ok_points(frame).to_numpy()).set_axis(frame.index)
    out = frame.copy()
    out["series"] = cell_of.map(primary["series"]).astype("Int64")
    out["scaling_mode"] = cell_of.map(primary["mode"])
    out["baseline_nodes"] = cell_of.map(primary["baseline_nodes"])
    base = out["series"].map(base_tps).astype(float).where(out["scaling_mode"] != "single")
    out["speedup"] = out["tokens_per_s"] / base
    out["scaling_efficiency"] = out["speedup"] / (out["nodes"] / out["baseline_nodes"])
    out["below_prediction"] = below_prediction(out["scaling_efficiency"], out["pred_scaling_efficiency"])
    return out
