"""Result records -> the report's columns: one list per frame column, one value per record, no pandas.

frame.py makes its frame of these; a worker reading a chunk of a results folder for the report
(bench/analysis/report/reading.py) builds its chunk's columns and returns them, which costs a
fraction of pickling the records (a validated record pickles as slowly as it validates), and
`concat_columns` joins the chunks in file order: the columns one process builds of all records.
Missing metrics are None or NaN (`_MISSING`, for a section a record lacks); frame.py types them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from bench.analysis.planner.failures import usd_per_mtoken
from bench.analysis.planner.plan_object import value_at
from bench.analysis.report.series_keys import PATHS as KEY_PATHS
from bench.analysis.report.series_keys import scaling_keys
from bench.schema.metrics import PathReader, get, shown_in
from bench.schema.metrics import columns as metric_columns
from bench.schema.record import RunResult
from bench.schema.spec import DebugKnobs, TrainSpec
from bench.schema.units import GIB

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
    # The predicted split, beside the profiled steps' measured one (reports/report/breakdown.py); on CPU the
    # planner charges overlapped communication back in full under other_detail_s.comm_interference.
    "step_time_split_s.compute": "pred_compute_s",
    "step_time_split_s.exposed_comm": "pred_exposed_comm_s",
    "step_time_split_s.other": "pred_other_s",
    "other_detail_s.comm_interference": "pred_comm_interference_s",
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


def _usd_per_mtoken(read: PathReader) -> list[float | None]:
    """Each record's dollars per million tokens (the catalogue's usd_per_mtoken): None without a price."""
    rows = zip(
        read("spec.cluster.usd_per_node_hour"),
        read("spec.nodes"),
        read("metrics.tokens_per_s"),
        read("metrics.job.job_goodput"),
        strict=True,
    )
    return [usd_per_mtoken(price, nodes, rate, goodput or 1.0) for price, nodes, rate, goodput in rows]


def frame_columns(records: Iterable[RunResult]) -> dict[str, list[Any]]:
    """Every column of the report's frame (frame.py COLUMNS), one value per record, in record order.

    Built column by column: each column is one pass over the records (bench.schema.metrics.PathReader
    reads each path once, a model's fields in one pass), and each point's series keys are those of
    its configuration, written once (series_keys.py)."""
    records = list(records)
    read = PathReader(records)
    read.read_all([*_PATHS.values(), *(m.path for m in shown_in("frame") if m.path), *_READ, *KEY_PATHS])
    columns: dict[str, list[Any]] = metric_columns(records, "frame", read)
    columns["usd_per_mtoken"] = _usd_per_mtoken(read)
    columns.update({column: read(path) for column, path in _PATHS.items()})
    micro, accum, world = columns["micro_batch"], columns["grad_accum"], columns["world_size"]
    columns["per_device_batch"] = [m * a for m, a in zip(micro, accum, strict=True)]
    columns["global_batch"] = [w * m * a for w, m, a in zip(world, micro, accum, strict=True)]
    columns["weak_key"], columns["strong_key"] = scaling_keys(records, read)
    columns["variant"] = _variants(read)
    columns["tokens_per_step"] = [
        tokens or spec.tokens_per_step
        for tokens, spec in zip(read("metrics.tokens_per_step"), read("spec"), strict=True)
    ]
    columns["step_times_s"] = list(map(list, read("metrics.step_times_s")))
    # Why MFU is null (e.g. a device without a published peak), for the report's plot notes.
    columns["mfu_note"] = [notes.get("mfu") for notes in read("notes")]
    # The device's capacity, as the record's cluster says (it carries its facts).
    columns["device_memory_bytes"] = [gib * GIB for gib in read("spec.cluster.device_memory_gib")]
    columns["hostnames"] = [" ".join(hosts) for hosts in read("env.hostnames")]
    checkpoints = read("metrics.checkpoint")
    columns["ckpt_mode"], columns["ckpt_every"] = (
        [_MISSING if c is None else getattr(c, name) for c in checkpoints] for name in ("mode", "every")
    )
    for sections in (
        [prediction_values(p) for p in read("prediction")],
        [_preflight(r) if summary is not None else {} for r, summary in zip(records, read("preflight"), strict=True)],
        [_host_load(r) if loads else {} for r, loads in zip(records, read("metrics.host_load"), strict=True)],
        [_telemetry(r) if t is not None else {} for r, t in zip(records, read("metrics.telemetry"), strict=True)],
        [
            breakdown_values(r) if b is not None else {}
            for r, b in zip(records, read("metrics.step_breakdown"), strict=True)
        ],
    ):
        columns.update(_spread(sections, _SECTION_COLUMNS))
    for column in _SECTION_COLUMNS:
        columns.setdefault(column, [_MISSING] * len(records))
    return columns


def concat_columns(parts: Sequence[dict[str, list[Any]]]) -> dict[str, list[Any]]:
    """The columns of several shares of records, in the order given (each share's frame_columns)."""
    if len(parts) == 1:
        return parts[0]
    return {name: [value for part in parts for value in part[name]] for name in parts[0]}


# The columns read straight from the record (a dotted path each).
_PATHS = {
    "sweep": "sweep", "point_id": "point_id", "status": "status", "error": "error", "model": "spec.model.name",
    "strategy": "spec.strategy", "precision": "spec.precision", "cluster": "spec.cluster.name",
    "launcher": "spec.launcher", "nodes": "spec.nodes", "gpus_per_node": "spec.gpus_per_node",
    "world_size": "spec.world_size", "micro_batch": "spec.train.micro_batch", "grad_accum": "spec.train.grad_accum",
    "seq_len": "spec.train.seq_len", "activation_checkpointing": "spec.train.activation_checkpointing",
    "compile": "spec.train.compile", "cpu_offload": "spec.train.cpu_offload", "repeat": "spec.repeat",
    "steps": "spec.train.steps", "warmup_steps": "spec.train.warmup_steps", "params": "model_info.params",
    "wall_s": "wall_s", "started_at": "started_at", "finished_at": "finished_at",
    "torch": "env.torch", "cuda": "env.cuda", "nccl": "env.nccl", "device_name": "env.device_name",
    "device_count": "env.device_count", "git_sha": "env.git_sha", "harness": "env.harness",
    # Whether the point held the host lock (False: the host was shared; None: a cluster launcher).
    "exclusive_host": "env.exclusive_host",
}  # fmt: skip
# Paths the other columns read (the variant's knobs among them), fetched with the rest.
_VARIANT_KNOBS = ("ac_every", "ac_save_ops", "checkpoint", "checkpoint_every")
_READ = (
    "metrics.tokens_per_step", "metrics.step_times_s", "notes", "spec.cluster.device_memory_gib", "env.hostnames",
    "metrics.checkpoint", "prediction", "preflight", "metrics.host_load", "metrics.telemetry",
    "spec.model.overrides", "spec.cluster.overrides", *(f"spec.debug.{name}" for name in DebugKnobs.model_fields),
    *(f"spec.train.{name}" for name in _VARIANT_KNOBS),
)  # fmt: skip
# A column a record has no value for (a section it lacks): NaN, as a row without the key reads.
_MISSING = float("nan")


def _spread(rows: list[dict[str, Any]], known: Sequence[str]) -> dict[str, list[Any]]:
    """Per-record dicts (empty where a record lacks the section) as columns, _MISSING where absent."""
    if not any(rows):
        return {}
    keys = [key for key in known if any(key in row for row in rows)]
    return {key: [row.get(key, _MISSING) for row in rows] for key in keys}


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


# The profiled steps' split beyond its catalogue metrics (compute_s, exposed_comm_s, idle_s): the step,
# idle's named parts and exposed communication by collective, for the report's "where the step went".
BREAKDOWN_COLUMNS = ["split_step_s", "split_fsdp_s", "split_barrier_s",
                     *(f"split_exposed_{kind}_s" for kind in ("all_gather", "reduce_scatter", "all_reduce"))]  # fmt: skip


def breakdown_values(record: RunResult) -> dict[str, Any]:
    """A record's BREAKDOWN_COLUMNS (empty without a profiled split)."""
    b = record.metrics.step_breakdown
    if b is None:
        return {}
    kinds = {f"split_exposed_{kind}_s": b.exposed_comm_s_by_kind.get(kind) for kind in ("all_gather", "reduce_scatter",
                                                                                       "all_reduce")}  # fmt: skip
    return {"split_step_s": b.step_s, "split_fsdp_s": b.fsdp_s, "split_barrier_s": b.barrier_s, **kinds}


def _variants(read: PathReader) -> list[str]:
    """Each record's non-default model/cluster overrides, debug knobs, checkpointing knobs and DCP
    checkpoints, as config overrides (the report's rerun commands use them): points differing here
    never share a series. Column by column: a knob's part of each record's text, then each record's
    parts joined (DebugKnobs' fields are plain values: their dump is their values)."""
    parts = [
        [" ".join(f"model.{k}={v}" for k, v in sorted(o.items())) if o else None for o in read("spec.model.overrides")],
        [" ".join(f"cluster.{k}={_compact(v)}" for k, v in sorted(o.items())) if o else None
         for o in read("spec.cluster.overrides")],
    ]  # fmt: skip
    for name, default in _DEBUG_DEFAULTS.items():
        parts.append([f"debug.{name}={v}" if v != default else None for v in read(f"spec.debug.{name}")])
    for name in _VARIANT_KNOBS:
        default = getattr(_TRAIN_DEFAULTS, name)
        parts.append([
            f"train.{name}=" + (f"[{','.join(v)}]" if isinstance(v, list | tuple) else str(v)) if v != default else None
            for v in read(f"spec.train.{name}")
        ])  # fmt: skip
    return [" ".join(filter(None, record)) for record in zip(*parts, strict=True)]


_DEBUG_DEFAULTS = DebugKnobs().model_dump()
_TRAIN_DEFAULTS = TrainSpec()


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


# The columns the per-record sections give (predictions, preflight, host load, telemetry).
_SECTION_COLUMNS = [
    *PREDICTION_KEYS.values(), "preflight_link_gbps", "nominal_link_gbps", "preflight_matmul_tflops",
    "peak_tflops", "preflight_stragglers", "host_load_max", "loaded_host", "energy_source", "telemetry_sidecar",
    "energy_note", *BREAKDOWN_COLUMNS,
]  # fmt: skip
