"""Scaling arithmetic: configurations (cells), scaling series, efficiency and speedup.

A *cell* is one configuration at one node count; repeats of a point (spec.repeat) pool into
it. A *series* is the set of cells that differ only in node count:
- weak scaling: the per-device batch (micro_batch x grad_accum) is fixed, so the global batch
  grows with the nodes (the usual benchmark);
- strong scaling: the global batch (world_size x micro_batch x grad_accum) is fixed, so each
  device gets less work as nodes grow.
Scaling efficiency at N = (tokens/s at N / tokens/s at the baseline) / (N / baseline), where
the baseline is the series' smallest node count. Every median, interval and efficiency comes
from bench.analysis.stats, the statistics engine `check` and the sweep summary use too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.analysis.report.columns import BREAKDOWN_COLUMNS
from bench.analysis.report.contention import suspect_efficiency
from bench.analysis.report.diagnosis import FLAG_POINTS
from bench.analysis.report.frame import float_values
from bench.analysis.stats import (
    DENOMINATOR,
    MIN_RUNS,
    NUMERATOR,
    bootstrap_medians,
    percentile_interval,
    pooled_medians,
    ratio_interval,
    scaling_efficiency,
)
from bench.schema.metrics import shown_in

# The configuration columns that name a series in legends and tables (reports/report/labels.py); which
# points form a series is bench.analysis.stats.scaling_key's decision (the weak_key/strong_key columns),
# the same one the planner makes. The named columns come first so series keep a readable order.
GROUP_KEYS = [
    "sweep", "model", "variant", "strategy", "precision", "cluster", "seq_len", "gpus_per_node",
    "activation_checkpointing", "compile", "cpu_offload",
]  # fmt: skip
# One configuration at one node count; repeats (spec.repeat) are pooled into it.
CELL_KEYS = [*GROUP_KEYS, "micro_batch", "grad_accum", "weak_key", "strong_key", "nodes"]
WEAK_KEYS = [*GROUP_KEYS, "micro_batch", "grad_accum", "weak_key"]
STRONG_KEYS = [*GROUP_KEYS, "global_batch", "strong_key"]

# A point is flagged when its measured efficiency is this far below the planner's prediction
# (a fraction: 0.10 = 10 percentage points; the threshold itself lives in bench/analysis/report/diagnosis.py).
PREDICTION_TOLERANCE = FLAG_POINTS / 100

# Repeats pool as the catalogue says (bench/schema/metrics.py `repeats`): the run-level metrics by the
# median of their runs, peak memory by the largest run; tokens/s, step time and MFU by the pooled median
# of every run's steps (below). The planner's predictions are the same for every repeat.
_MEDIAN_COLUMNS = ["pred_tokens_per_s_per_device", "pred_scaling_efficiency", "pred_step_time_s", "pred_memory_bytes",
                   "pred_autotune_rank", "pred_autotune_value", "pred_compute_s", "pred_exposed_comm_s",
                   "pred_comm_interference_s", *BREAKDOWN_COLUMNS,
                   *(m.key for m in shown_in("frame") if m.repeats == "median")]  # fmt: skip
_MAX_COLUMNS = [*(m.key for m in shown_in("frame") if m.repeats == "max"), "device_memory_bytes"]
_CELL_COLUMNS = [
    *CELL_KEYS, "per_device_batch", "global_batch", "world_size", "tokens_per_step", "repeats", "point_ids", "step_runs", "step_boot",
    "tokens_per_s", "tps_ci_low", "tps_ci_high", "tokens_per_s_per_device", "tpsd_ci_low", "tpsd_ci_high",
    "step_time_median_s", "mfu", *_MEDIAN_COLUMNS, *_MAX_COLUMNS, "loaded_host",
    "shared_host",
]  # fmt: skip
_SCALING_COLUMNS = [*_CELL_COLUMNS, "cell", "series", "mode", "baseline_nodes", "speedup", "scaling_efficiency",
                    "eff_ci_low", "eff_ci_high", "below_prediction", "contention"]  # fmt: skip


def ok_points(frame: pd.DataFrame) -> pd.Series:
    """Rows that measured a throughput (status ok): the only ones that enter the scaling."""
    return (frame["status"] == "ok") & frame["tokens_per_s"].notna()


def build_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and node count over the ok points: medians and 95 % CIs.

    A cell's tokens/s is its tokens per step over the pooled median step time of its runs, and
    its interval the engine's two-level bootstrap (cells with repeats only), so a cell's numbers
    are the ones `check` computes for the same records. Vectorised (groupby aggregations, one
    bootstrap call for every cell): a 10,000-point report has thousands of cells.
    """
    ok = frame[ok_points(frame)].reset_index(drop=True)
    if ok.empty:
        return pd.DataFrame(columns=_CELL_COLUMNS).rename_axis("cell")
    grouped = ok.groupby(CELL_KEYS, sort=True, dropna=False)
    firsts = {c: (c, "first") for c in ("per_device_batch", "global_batch", "world_size", "tokens_per_step")}
    medians = {c: (c, "median") for c in _MEDIAN_COLUMNS}
    maxima = {c: (c, "max") for c in _MAX_COLUMNS}
    cells = grouped.agg(repeats=("point_id", "size"), **firsts, **medians, **maxima).reset_index()
    positions = _group_positions(grouped.ngroup().to_numpy(), len(cells))
    point_ids = ok["point_id"].to_numpy(object)
    step_times = ok["step_times_s"].to_numpy(object)
    cells["point_ids"] = [list(point_ids[p]) for p in positions]
    cells["step_runs"] = [[step_times[i] for i in p] for p in positions]
    median_step = pooled_medians(list(cells["step_runs"]))
    cells["step_time_median_s"] = median_step
    cells["tokens_per_s"] = cells["tokens_per_step"] / median_step
    cells["tokens_per_s_per_device"] = cells["tokens_per_s"] / cells["world_size"]
    # MFU is tokens/s times a constant of the configuration (FLOPs per token over the peak).
    mfu_rate = (ok["mfu"] / ok["tokens_per_s"]).to_numpy(float)
    cells["mfu"] = pooled_medians([[mfu_rate[p]] for p in positions]) * cells["tokens_per_s"]
    boot = _bootstrap(cells["step_runs"], cells["repeats"], NUMERATOR)
    cells["step_boot"] = list(boot)
    low, high = percentile_interval(boot)
    # A longer step time is a lower throughput: the bounds swap.
    cells["tps_ci_low"], cells["tps_ci_high"] = cells["tokens_per_step"] / high, cells["tokens_per_step"] / low
    # tokens/s per device is tokens/s over the (fixed) world size of the cell: so is its interval.
    cells["tpsd_ci_low"] = cells["tps_ci_low"] / cells["world_size"]
    cells["tpsd_ci_high"] = cells["tps_ci_high"] / cells["world_size"]
    # The conditions of the cell's runs (bench/analysis/report/contention.py): any run on a loaded
    # host, or without the host lock, makes the cell's numbers suspect.
    loaded, shared = ok["loaded_host"].to_numpy(object), shared_host(ok).to_numpy(bool)
    cells["loaded_host"] = [_hosts(loaded[p]) for p in positions]
    cells["shared_host"] = [bool(shared[p].any()) for p in positions]
    return cells[_CELL_COLUMNS].rename_axis("cell")


def shared_host(frame: pd.DataFrame) -> pd.Series:
    """Rows measured without the host lock (env.exclusive_host false; None, a cluster, is not)."""
    return frame["exclusive_host"].eq(False)


def _hosts(values: np.ndarray) -> str | None:
    """The distinct host names of some rows' `loaded_host` (space-separated), None for none."""
    hosts = sorted({host for value in values if isinstance(value, str) for host in value.split()})
    return " ".join(hosts) or None


def _bootstrap(step_runs: pd.Series, repeats: pd.Series, stream: int) -> np.ndarray:
    """Bootstrap median step times of the cells with MIN_RUNS or more runs (NaN rows for the others)."""
    wanted = (repeats >= MIN_RUNS).to_numpy()
    runs = list(step_runs)
    return bootstrap_medians([r if keep else [] for r, keep in zip(runs, wanted, strict=True)], stream)


def _group_positions(group_ids: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Row positions of each group, in group order (one argsort instead of a loop over groups)."""
    order = np.argsort(group_ids, kind="stable")
    return np.split(order, np.cumsum(np.bincount(group_ids, minlength=n_groups))[:-1])


def build_scaling(cells: pd.DataFrame) -> pd.DataFrame:
    """Every scaling series, one row per (series, node count), with efficiency, speedup and CIs.

    Weak series come first. A strong series is kept only when it scales cells no weak series
    covers (otherwise a weak sweep over two batch sizes would sprout spurious strong series).
    Cells in no series of two or more node counts form "single" series with no efficiency.
    """
    weak = _with_efficiency(_series(cells, WEAK_KEYS, "weak"), "weak")
    covered = set(weak["cell"])
    strong = _series(cells, STRONG_KEYS, "strong")
    # Only the kept strong series get their efficiencies (and their baselines' resamples) computed.
    strong = strong[strong["series"].isin(strong.loc[~strong["cell"].isin(covered), "series"])]
    strong = _with_efficiency(strong.reset_index(drop=True), "strong")
    covered |= set(strong["cell"])
    single = _series(cells[~cells.index.isin(covered)], WEAK_KEYS, "single")
    single = _with_efficiency(single, "single")
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
    return data.reset_index(drop=True)


def _with_efficiency(data: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Speedup and efficiency against each series' first (smallest) node count, vectorised (none
    to compute for no series)."""
    if data.empty:
        return data
    base = data.groupby("series")[["nodes", "tokens_per_s", "cell"]].transform("first")
    data = data.assign(mode=mode, baseline_nodes=base["nodes"])
    data["speedup"] = data["tokens_per_s"] / base["tokens_per_s"]
    data["scaling_efficiency"] = scaling_efficiency(
        data["tokens_per_s"], base["tokens_per_s"], data["nodes"], base["nodes"]
    )
    data["eff_ci_low"], data["eff_ci_high"] = np.nan, np.nan
    if mode == "single":
        data[["speedup", "scaling_efficiency"]] = np.nan
    else:
        _add_efficiency_ci(data, base["cell"])
    data["below_prediction"] = below_prediction(data["scaling_efficiency"], data["pred_scaling_efficiency"])
    at_base = (data["cell"] == base["cell"]).to_numpy()
    baseline = data.set_index("cell").loc[base["cell"], ["loaded_host", "shared_host"]]
    data["contention"] = _contention(
        data["scaling_efficiency"], data["eff_ci_low"], data["loaded_host"], data["shared_host"],
        baseline["loaded_host"].where(~at_base), baseline["shared_host"].where(~at_base),
    )  # fmt: skip
    return data


def _contention(efficiency, ci_low, loaded, shared, base_loaded, base_shared) -> list[str | None]:
    """bench.analysis.report.contention's verdict per row (aligned sequences, one per argument).

    The rule is asked only about the rows where one of its reasons may hold (an efficiency or an
    interval's low end above 100 %, a host named or a flag set): every other row's verdict is None,
    as the rule gives it, and a clean sweep's rows are all of that kind."""
    columns = [list(c) for c in (efficiency, ci_low, loaded, shared, base_loaded, base_shared)]
    if len({len(column) for column in columns}) > 1:
        raise ValueError("_contention: the columns are not aligned (different lengths)")
    above = (float_values(columns[0]) > 1.0) | (float_values(columns[1]) > 1.0)
    hosts = [_text(a) is not None or _true(b) or _text(c) is not None or _true(d) for a, b, c, d in zip(*columns[2:])]
    verdicts: list[str | None] = [None] * len(hosts)
    for row in np.flatnonzero(above | np.asarray(hosts, bool)):
        eff, low, host, own, b_host, b_shared = (column[row] for column in columns)
        verdicts[row] = suspect_efficiency(
            eff,
            low,
            loaded_host=_text(host),
            shared=_true(own),
            baseline_loaded_host=_text(b_host),
            baseline_shared=_true(b_shared),
        )
    return verdicts


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _true(value) -> bool:
    """A True flag (NaN, where a row has no series or sits at its baseline, is not)."""
    return isinstance(value, bool | np.bool_) and bool(value)


def _add_efficiency_ci(data: pd.DataFrame, base_cell: pd.Series) -> None:
    """Bootstrap bounds where both sides have repeats; none at the baseline (1 by definition).

    Efficiency is tokens/s at N over tokens/s at the baseline over the node ratio, i.e.
    k / (step time at N / step time at base) with k = tokens-per-step ratio / node ratio. The
    step-time ratio's interval is the engine's (the cell's own resamples over the baseline
    cell's, drawn on the other stream), exactly as `check` computes current over baseline.
    """
    repeats = dict(zip(data["cell"], data["repeats"], strict=True))
    mask = (data["cell"] != base_cell) & (data["repeats"] >= MIN_RUNS) & (base_cell.map(repeats) >= MIN_RUNS)
    if not mask.any():
        return
    rows = data[mask]
    base_rows = data.set_index("cell").loc[base_cell[mask]]
    own = np.vstack(list(rows["step_boot"]))
    # Each baseline cell is resampled once on the baseline's stream, whatever number of cells it serves.
    base_cells, serves = np.unique(base_cell[mask].to_numpy(), return_inverse=True)
    base = bootstrap_medians(list(data.set_index("cell").loc[base_cells, "step_runs"]), DENOMINATOR)[serves]
    low, high = ratio_interval(own, base)
    tokens = rows["tokens_per_step"].to_numpy(float) / base_rows["tokens_per_step"].to_numpy(float)
    k = tokens / (rows["nodes"].to_numpy(float) / base_rows["nodes"].to_numpy(float))
    # A longer step at N is a lower efficiency: the bounds swap.
    data.loc[mask, "eff_ci_low"], data.loc[mask, "eff_ci_high"] = k / high, k / low


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
    out = frame.copy()  # columns only appended, after the records' own
    out["series"] = cell_of.map(primary["series"]).astype("Int64")
    out["scaling_mode"] = cell_of.map(primary["mode"])
    out["baseline_nodes"] = cell_of.map(primary["baseline_nodes"])
    base = out["series"].map(base_tps).astype(float).where(out["scaling_mode"] != "single")
    out["speedup"] = out["tokens_per_s"] / base
    out["scaling_efficiency"] = scaling_efficiency(out["tokens_per_s"], base, out["nodes"], out["baseline_nodes"])
    out["below_prediction"] = below_prediction(out["scaling_efficiency"], out["pred_scaling_efficiency"])
    # A point's efficiency is judged with its cell's interval and its series' baseline cell's conditions.
    baseline = scaling[scaling["nodes"] == scaling["baseline_nodes"]].groupby("series")[["loaded_host", "shared_host"]]
    baseline = baseline.first()
    away = (out["nodes"] != out["baseline_nodes"]).to_numpy()
    out["contention"] = _contention(
        out["scaling_efficiency"], cell_of.map(primary["eff_ci_low"]), out["loaded_host"], shared_host(out),
        out["series"].map(baseline["loaded_host"]).where(away), out["series"].map(baseline["shared_host"]).where(away),
    )  # fmt: skip
    return out
