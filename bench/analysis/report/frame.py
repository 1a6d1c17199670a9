"""Result records -> one tidy pandas DataFrame, one row per point.

Everything downstream (aggregation, plots, tables, CSV) reads this frame, never the records,
so a new output format needs no knowledge of the record schema. Missing metrics stay NaN:
a failed point keeps its row (status, error) with empty numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pandas as pd

from bench.analysis.planner.plan_object import value_at
from bench.analysis.stats import scaling_key
from bench.schema.metrics import get, shown_in
from bench.schema.metrics import values as metric_values
from bench.schema.record import RunResult
from bench.schema.spec import DebugKnobs
from bench.schema.units import GIB

# Columns that hold one list per row: kept in the frame for plots, left out of CSV.
LIST_COLUMNS = ("step_times_s",)
# The scaling-series keys (bench.analysis.stats.scaling_key): for aggregation only, left out of every export.
KEY_COLUMNS = ("weak_key", "strong_key")

# Prediction keys (the planner's numbers stored in RunResult.prediction) -> frame columns.
# Efficiencies are fractions (0.95 = 95 %), like the measured ones.
PREDICTION_KEYS = {
    "tokens_per_s_per_device": "pred_tokens_per_s_per_device",
    "scaling_efficiency": "pred_scaling_efficiency",
    "step_time_s": "pred_step_time_s",
    "memory_bytes_per_device.total": "pred_memory_bytes",
    "device_memory_bytes": "pred_device_memory_bytes",
    # Where the planner puts the step's time: bench/analysis/report/diagnosis.py names a flagged point's likely cause.
    "comm_time_s.exposed": "pred_comm_exposed_s",
    "comm_time_s.overlapped": "pred_comm_overlapped_s",
    # sweep.autotune=K: the planner's rank of the configuration in its search and the objective it predicted.
    "autotune.rank": "pred_autotune_rank",
    "autotune.value": "pred_autotune_value",
    # One checkpoint save (bench/analysis/planner/checkpoint.py): predicted beside the measured `ckpt_*` columns.
    "checkpoint.state_bytes": "pred_ckpt_state_bytes",
    "checkpoint.write_s": "pred_ckpt_write_s",
    "checkpoint.storage_gbps": "pred_ckpt_storage_gbps",
    "checkpoint.goodput": "pred_ckpt_goodput",
}
ENERGY = get("energy_per_token")
# Every metric column, in catalogue order (bench/schema/metrics.py: the metrics whose views include "frame").
METRIC_COLUMNS = [metric.key for metric in shown_in("frame")]


def records_to_frame(records: Iterable[RunResult]) -> pd.DataFrame:
    """One row per point (the latest record per sweep and point id wins)."""
    rows = [_row(record) for record in records]
    frame = pd.DataFrame.from_records(rows, columns=COLUMNS)
    for column in NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame = frame.sort_values("finished_at", na_position="first", kind="stable")
    frame = frame.drop_duplicates(["sweep", "point_id"], keep="last")
    return frame.sort_values(SORT_KEYS, kind="stable").reset_index(drop=True)


def _row(record: RunResult) -> dict[str, Any]:
    spec, train, metrics = record.spec, record.spec.train, record.metrics
    identity = spec.identity()
    row: dict[str, Any] = {
        "sweep": record.sweep, "point_id": record.point_id, "status": record.status, "error": record.error,
        "model": spec.model.name, "variant": variant(record), "strategy": spec.strategy, "precision": spec.precision,
        "cluster": spec.cluster.name, "launcher": spec.launcher, "nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node,
        "world_size": spec.world_size, "micro_batch": train.micro_batch, "grad_accum": train.grad_accum,
        "per_device_batch": train.micro_batch * train.grad_accum,
        "global_batch": spec.world_size * train.micro_batch * train.grad_accum,
        "seq_len": train.seq_len, "activation_checkpointing": train.activation_checkpointing,
        "compile": train.compile, "cpu_offload": train.cpu_offload, "repeat": spec.repeat, "steps": train.steps,
        "warmup_steps": train.warmup_steps, "params": record.model_info.params,
        "weak_key": scaling_key(identity, "weak"), "strong_key": scaling_key(identity, "strong"),
        "tokens_per_step": metrics.tokens_per_step or spec.tokens_per_step, "wall_s": record.wall_s,
        "started_at": record.started_at, "finished_at": record.finished_at,
        "step_times_s": list(metrics.step_times_s),
        # Why MFU is null (e.g. a device without a published peak), for the report's plot notes.
        "mfu_note": record.notes.get("mfu"),
        # The device's capacity, as the record's cluster says (it carries its facts).
        "device_memory_bytes": record.spec.cluster.device_memory_gib * GIB,
    }  # fmt: skip
    row.update(metric_values(record, "frame"))
    row.update(_env(record))
    row.update(_checkpoint(record))
    row.update(prediction_values(record.prediction))
    row.update(_preflight(record))
    row.update(_host_load(record))
    row.update(_telemetry(record))
    return row


def _preflight(record: RunResult) -> dict[str, Any]:
    """What the point's world-shape preflight measured, beside the preset's nominal figures
    (the cluster fields' units: Gbit/s per GPU within a node, per node across nodes)."""
    summary, spec = record.preflight, record.spec
    if summary is None:
        return {}
    links = summary.measured_links
    across = spec.nodes > 1
    slow = [
        f"rank {s.rank} ({s.host}) {s.measure} +{100 * s.slower_by:.0f} %"
        if s.rank is not None
        else f"node {s.node} ({s.host}) {s.measure} +{100 * s.slower_by:.0f} %"
        for s in summary.stragglers
    ]
    return {
        "preflight_link_gbps": links.get("inter_node_gbps" if across else "intra_node_gbps"),
        "nominal_link_gbps": spec.cluster.inter_node_gbps if across else spec.cluster.intra_node_gbps,
        "preflight_matmul_tflops": summary.matmul_tflops_median,
        "peak_tflops": spec.matmul_peak_tflops,
        "preflight_stragglers": "; ".join(slow) or None,
    }


def _host_load(record: RunResult) -> dict[str, Any]:
    """The busiest host's load average around the timed window, and whether it was loaded."""
    loads = record.metrics.host_load
    if not loads:
        return {}
    return {
        "host_load_max": max(max(h.before, h.after) for h in loads),
        "loaded_host": " ".join(h.host for h in loads if h.loaded) or None,
    }


def _telemetry(record: RunResult) -> dict[str, Any]:
    """What the telemetry says beside its metrics: the energy source, the series' file, why energy is missing."""
    telemetry = record.metrics.telemetry
    if telemetry is None:
        return {}
    return {
        "energy_source": telemetry.energy_source,
        "telemetry_sidecar": telemetry.sidecar,
        # Why energy per token is null (no GPU counter, no readable RAPL), for the report's notes.
        "energy_note": telemetry.missing.get(ENERGY.field),
    }


def _checkpoint(record: RunResult) -> dict[str, Any]:
    """How the point checkpointed (its metrics are catalogue columns)."""
    ckpt = record.metrics.checkpoint
    return {} if ckpt is None else {"ckpt_mode": ckpt.mode, "ckpt_every": ckpt.every}


def _env(record: RunResult) -> dict[str, Any]:
    env = record.env
    return {
        "torch": env.torch,
        "cuda": env.cuda,
        "nccl": env.nccl,
        "device_name": env.device_name,
        "device_count": env.device_count,
        "hostnames": " ".join(env.hostnames),
        "git_sha": env.git_sha,
        "harness": env.harness,
        # Whether the point held the host lock (False: the host was shared; None: a cluster launcher).
        "exclusive_host": env.exclusive_host,
    }


def variant(record: RunResult) -> str:
    """Non-default model/cluster overrides, debug knobs, checkpointing knobs and DCP checkpoints, as
    config overrides (the report's rerun commands use them): points differing here never share a series."""
    spec = record.spec
    parts = [f"model.{k}={v}" for k, v in sorted(spec.model.overrides.items())]
    parts += [f"cluster.{k}={_compact(v)}" for k, v in sorted(spec.cluster.overrides.items())]
    defaults = DebugKnobs().model_dump()
    parts += [f"debug.{k}={v}" for k, v in spec.debug.model_dump().items() if v != defaults[k]]
    train, train_defaults = spec.train, type(spec.train)()
    for name in ("ac_every", "ac_save_ops", "checkpoint", "checkpoint_every"):
        value = getattr(train, name)
        if value != getattr(train_defaults, name):
            parts.append(
                f"train.{name}=" + (f"[{','.join(value)}]" if isinstance(value, (list, tuple)) else str(value))
            )
    return " ".join(parts)


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if isinstance(value, dict) else str(value)


def prediction_values(prediction: dict[str, Any] | None) -> dict[str, float | None]:
    """The planner's predicted numbers as frame columns; nested keys are read as `a.b` paths."""
    if not prediction:
        return {}
    return {column: _number(value_at(prediction, key)) for key, column in PREDICTION_KEYS.items()}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


SORT_KEYS = ["sweep", "model", "strategy", "precision", "nodes", "gpus_per_node", "per_device_batch", "repeat"]

NUMERIC_COLUMNS = [
    *METRIC_COLUMNS, "tokens_per_step", "wall_s", "device_memory_bytes", "ckpt_every", *PREDICTION_KEYS.values(),
    "preflight_link_gbps", "nominal_link_gbps", "preflight_matmul_tflops", "peak_tflops", "host_load_max",
]  # fmt: skip


COLUMNS = [
    "sweep", "point_id", "status", "error", "model", "variant", "strategy", "precision", "cluster", "launcher",
    "nodes", "gpus_per_node", "world_size", "micro_batch", "grad_accum", "per_device_batch", "global_batch",
    "seq_len", "activation_checkpointing", "compile", "cpu_offload", "repeat", "steps", "warmup_steps", "params",
    "tokens_per_step", *METRIC_COLUMNS, "device_memory_bytes", "wall_s", "started_at", "finished_at", "torch",
    "cuda", "nccl", "device_name", "device_count", "hostnames", "git_sha", "harness", "exclusive_host", "mfu_note",
    "ckpt_mode", "ckpt_every", *PREDICTION_KEYS.values(), "preflight_link_gbps", "nominal_link_gbps",
    "preflight_matmul_tflops", "peak_tflops", "preflight_stragglers", "host_load_max", "loaded_host",
    "energy_source", "telemetry_sidecar", "energy_note", "step_times_s", "weak_key", "strong_key",
]  # fmt: skip
