"""Assemble one point's prediction as plain, JSON-able data, and scaling efficiency across points.

`predict(spec)` is the prediction of one point; `predict_grid(specs)` gives every point of a grid
its plan object (`point_id` and this dict, bench/analysis/planner/plan_object.py), scaling
efficiency filled: what `plan` prints and the sweep stores in `RunResult.prediction`
(`sweep.plan=true` skips points with `fits == False`), and what reports read. Keys:

| key | meaning |
|---|---|
| `spec`, `model_info` | the resolved spec and the model's parameter counts (as in a result record) |
| `memory_bytes_per_device` | `params`, `grads`, `optimizer`, `unsharded_params`, `unsharded_grads`, `activations`, `logits`, `headroom`, `total`, `host_offloaded` |
| `peak_memory_bytes` | `moment` (`loss`, `backward` or `root_reduce`, bench/analysis/planner/memory.py), `allocated` and `reserved` (the allocator's peaks, as a record's `peak_mem_bytes.max` and `reserved_max` on GPUs), `device` (= `total`: the runtime added) |
| `device_memory_bytes`, `fits`, `max_micro_batch` | capacity, whether `total` fits (a CPU host's RAM is shared by all its ranks), the largest micro-batch that fits (0: none) |
| `step_time_s` | predicted seconds per optimizer step |
| `step_time_split_s` | `compute`, `exposed_comm`, `other` (they sum to `step_time_s`) |
| `other_detail_s` | `optimizer`, `comm_interference`, `offload` |
| `comm_bytes_per_step` | `all_gather`, `reduce_scatter`, `all_reduce`: per rank, the engine's counting convention |
| `comm_time_s` | `exposed`, `overlapped` seconds of communication per step |
| `tokens_per_step`, `tokens_per_s`, `tokens_per_s_per_device` | global batch tokens and predicted throughput |
| `mfu`, `hfu` | predicted, against the datasheet peak; null without one (CPU) |
| `scaling_efficiency`, `scaling_baseline_nodes` | filled by `with_scaling_efficiency`; null for a group's baseline or a lone point |
| `assumptions` | the efficiency, interference, links and calibration file the numbers rest on |
| `checkpoint` | one DCP save of model + AdamW state: `state_bytes` (exact), `state_bytes_per_rank`, `write_s`, `read_s` at `storage_gbps`; with train.checkpoint, `blocked_s` per save and `goodput` at its interval (bench/analysis/planner/checkpoint.py) |
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from bench.analysis.planner.calibration import calibrated_cluster, load_cpu_calibration, overlap_interference
from bench.analysis.planner.checkpoint import predict_checkpoint
from bench.analysis.planner.comm import comm_bytes_per_micro_step
from bench.analysis.planner.compute import compute_rate
from bench.analysis.planner.failures import plan_failures, usd_per_mtoken
from bench.analysis.planner.memory import device_memory_bytes, fits, max_micro_batch, memory_breakdown, peak_memory
from bench.analysis.planner.plan_object import plan_object
from bench.analysis.planner.step import MicroStep, micro_step, optimizer_seconds, step_time
from bench.analysis.planner.workload import Workload, workload_from_spec
from bench.analysis.stats import scaling_efficiency, scaling_key
from bench.schema.flops import flops_per_token, hardware_flops_per_token
from bench.schema.identity import IdentityMemo, id_of_text


def predict_workload(w: Workload, memo: AccumulationMemo | None = None) -> dict[str, Any]:
    """Everything the planner says about one workload (keys: the module docstring, minus `spec`);
    with `memo`, what reads no grad_accum shared with the grid's other accumulations of it."""
    part = memo.part(w) if memo is not None else accumulation_free(w)
    times = step_time(w, part.micro, part.optimizer)
    tokens_per_step = w.world_size * w.micro_batch * w.grad_accum * w.seq_len
    per_device = tokens_per_step / times["total"] / w.world_size
    return {
        "model_info": w.shape.info_dict(),
        "memory_bytes_per_device": dict(part.memory),
        "peak_memory_bytes": dict(part.peak),
        "device_memory_bytes": part.device_memory,
        "fits": part.fits,
        "max_micro_batch": part.max_micro_batch,
        "step_time_s": times["total"],
        "step_time_split_s": {k: times[k] for k in ("compute", "exposed_comm", "other")},
        "other_detail_s": times["other_detail"],
        "comm_bytes_per_step": {kind: value * w.grad_accum for kind, value in part.comm_per_micro.items()},
        "comm_time_s": {"exposed": times["exposed_comm"], "overlapped": times["overlapped_comm"]},
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": per_device * w.world_size,
        "tokens_per_s_per_device": per_device,
        **utilization(w, per_device),
        "scaling_efficiency": None,
        "scaling_baseline_nodes": None,
        "assumptions": {k: dict(v) if type(v) is dict else v for k, v in part.assumptions.items()},
    }


@dataclass(frozen=True)
class AccumulationFree:
    """What a workload's prediction holds that reads no grad_accum: only `comm_bytes_per_step`,
    `offload_seconds`, `step_time` and the tokens per step read it (bench/analysis/planner), each
    from these parts; the rest (memory, links, rates, the micro-step) is the same for every
    accumulation of one workload."""

    micro: MicroStep
    optimizer: float
    memory: dict[str, int]
    peak: dict[str, Any]
    device_memory: int
    fits: bool
    max_micro_batch: int
    comm_per_micro: dict[str, int]
    assumptions: dict[str, Any]


def accumulation_free(w: Workload) -> AccumulationFree:
    return AccumulationFree(
        micro_step(w), optimizer_seconds(w), memory_breakdown(w), peak_memory(w), device_memory_bytes(w), fits(w),
        max_micro_batch(w), comm_bytes_per_micro_step(w), assumptions(w),
    )  # fmt: skip


# Every field of a Workload but grad_accum, and those compared by identity (below).
_KEYED = tuple(f.name for f in dataclasses.fields(Workload) if f.name not in ("grad_accum", "cluster", "links", "cpu"))


class AccumulationMemo:
    """`accumulation_free` of a grid's workloads, once per workload whatever its grad_accum (a grid
    crossing train.grad_accum=1,2,4,8 computes it for a quarter of its points). Keyed by every other
    field of the workload, its cluster and CPU calibration by identity (a grid's points share their
    cluster section, bench/config/validate.py); the memo holds the workloads, so an id stays theirs
    while it lives: use one per grid. Its parts are read, never changed (predict_workload copies
    the dicts it returns)."""

    def __init__(self) -> None:
        self._parts: dict[tuple, tuple[Workload, AccumulationFree]] = {}

    def part(self, w: Workload) -> AccumulationFree:
        key = (*[getattr(w, name) for name in _KEYED], id(w.cluster), id(w.cpu), tuple(w.links.items()))
        entry = self._parts.get(key)
        if entry is None:
            entry = self._parts[key] = (w, accumulation_free(w))
        return entry[1]


def utilization(w: Workload, tokens_per_s_per_device: float) -> dict[str, float | None]:
    """Predicted MFU and HFU against the datasheet peak of the compute dtype (null without one)."""
    # The engine's convention: fp8 runs divide by the bf16 peak (recipes' mfu_peak_dtype).
    peak = w.cluster.peak_tflops.get(w.precision_recipe.mfu_peak_dtype) if w.cluster.device_type != "cpu" else None
    if not peak:
        return {"mfu": None, "hfu": None}
    model = flops_per_token(w.shape, w.seq_len)
    hardware = hardware_flops_per_token(w.shape, w.seq_len, w.activation_checkpointing, w.ac_every, w.ac_save_ops)
    return {
        "mfu": tokens_per_s_per_device * model / (peak * 1e12),
        "hfu": tokens_per_s_per_device * hardware / (peak * 1e12),
    }


def assumptions(w: Workload) -> dict[str, Any]:
    c = w.cluster
    out: dict[str, Any] = {
        "cluster": c.name,
        "device": c.device.name,
        "intra_node_gbps": c.intra_node_gbps,
        "inter_node_gbps": c.inter_node_gbps,
        "link_latency_s": c.link_latency_s,
        "achieved_tflops_per_device": compute_rate(w) / 1e12,
        "overlap_interference": overlap_interference(c.device_type),
    }
    if c.device_type == "cpu":
        calibration = w.cpu or load_cpu_calibration()
        out["calibration"] = calibration.path or "none: run `fsdp-bench calibrate` (defaults used)"
        out["collective_links"] = dict(w.links)
    return out


def predict(
    spec, preflight=None, dumps: SpecDumps | None = None, memo: AccumulationMemo | None = None
) -> dict[str, Any]:
    """The prediction for one RunSpec as a plain dict (keys: the module docstring); with a
    `preflight` record (bench/analysis/planner/from_preflight.py), from the links and rates it
    measured; with `dumps`, its `spec` written from the sections it shares with a grid's other
    specs; with `memo`, what reads no grad_accum computed once per workload (`AccumulationMemo`)."""
    cluster, links = calibrated_cluster(spec.cluster)
    cpu = None
    if preflight is not None:
        from bench.analysis.planner import from_preflight

        cluster = from_preflight.measured_cluster(cluster, preflight)
        links = {**links, **from_preflight.measured_links(preflight)}
        cpu = from_preflight.cpu_calibration(preflight)
    out = {"spec": dumps.dump(spec) if dumps is not None else spec.model_dump(mode="json")}
    workload = workload_from_spec(spec, cluster, links, cpu)
    out.update(predict_workload(workload, memo))
    if preflight is not None:
        out["assumptions"]["preflight"] = (
            f"{preflight.spec.nodes}x{preflight.spec.gpus_per_node} {preflight.finished_at}"
        )
    train = spec.train
    every = train.checkpoint_every or train.steps - train.warmup_steps
    out["checkpoint"] = predict_checkpoint(workload, out["step_time_s"], train.checkpoint, every)
    out.update(failures_and_cost(spec, out))
    return out


def failures_and_cost(spec, out: dict[str, Any]) -> dict[str, Any]:
    """With `cluster.node_mtbf_h`, the `failures` section (bench/analysis/planner/failures.py); with
    `cluster.usd_per_node_hour`, the `cost` section: dollars per million tokens at the planned
    throughput, goodput at the best interval included where failures are modelled."""
    cluster, added = spec.cluster, {}
    goodput = 1.0
    if cluster.node_mtbf_h is not None:
        ckpt = out["checkpoint"]
        save_s = ckpt["blocked_s"] if ckpt["blocked_s"] is not None else ckpt["write_s"]  # none: planned as sync
        added["failures"] = plan_failures(
            out["step_time_s"], save_s, ckpt["read_s"], cluster.restart_s, cluster.node_mtbf_h, spec.nodes
        )
        goodput = added["failures"]["goodput"] or 1.0
    if cluster.usd_per_node_hour is not None:
        added["cost"] = {
            "usd_per_node_hour": cluster.usd_per_node_hour,
            "price_source": cluster.price_source,
            "price_as_of": cluster.price_as_of,
            "usd_per_mtoken": usd_per_mtoken(cluster.usd_per_node_hour, spec.nodes, out["tokens_per_s"], goodput),
        }
    return added


def with_scaling_efficiency(
    predictions: Sequence[dict[str, Any]], specs: Sequence | None = None
) -> list[dict[str, Any]]:
    """Fill scaling efficiency against the smallest node count of each weak-scaling series
    (bench.analysis.stats: the same series and formula as the report's). `specs`: the predictions' RunSpecs,
    when the caller has them (else they are validated again from the predictions)."""
    from bench.schema.spec import RunSpec

    specs = specs if specs is not None else [RunSpec.model_validate(p["spec"]) for p in predictions]
    return _fill_scaling(predictions, [scaling_key(spec.identity()) for spec in specs])


def _fill_scaling(predictions: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for p, key in zip(predictions, keys, strict=True):
        groups.setdefault(key, []).append(p)
    for members in groups.values():
        base = min(members, key=lambda p: p["spec"]["nodes"])
        for p in members:
            if p is base or p["spec"]["nodes"] == base["spec"]["nodes"]:
                continue
            p["scaling_efficiency"] = scaling_efficiency(
                p["tokens_per_s"], base["tokens_per_s"], p["spec"]["nodes"], base["spec"]["nodes"]
            )
            p["scaling_baseline_nodes"] = base["spec"]["nodes"]
    return list(predictions)


def predict_grid(specs: Sequence, preflight=None) -> list[dict[str, Any]]:
    """The plan object (bench/analysis/planner/plan_object.py) of every point of a grid, scaling
    efficiency filled within each weak-scaling series: what `plan` prints and `sweep.plan` stores.
    Each spec's identity is computed once, for its point id and its series both, and the sections
    the grid's specs share once for all of them (an `IdentityMemo`: the same values, read only)."""
    memo, dumps, accumulations = IdentityMemo(), SpecDumps(), AccumulationMemo()
    identities = [memo.identity(spec) for spec in specs]
    predictions = [predict(spec, preflight, dumps, accumulations) for spec in specs]
    predictions = _fill_scaling(predictions, [scaling_key(i, text=memo.canonical_json) for i in identities])
    return [plan_object(id_of_text(memo.canonical_json(i)), p) for i, p in zip(identities, predictions)]


class SpecDumps:
    """`spec.model_dump(mode="json")` of a grid's specs, each section object they share (a grid's
    validated points share their model, cluster, train, debug and telemetry sections,
    bench/config/validate.py) dumped once: the same dict, whose section dicts the plan objects share.

    Why a section's dump can be reused: a section field serialises as its own model does (no field
    serializer on the spec; only a section of exactly the declared class is shared, so a subclass
    is dumped with its parent as pydantic would), and the specs of a plan are read, never changed.
    Nothing changes a plan object's `spec` after it is built (scaling efficiency reads its `nodes`;
    the printers, the CSV and the sweep's records read it), so sharing it is safe; the memo holds the
    sections it has seen, so an id stays theirs while it lives: use one per grid."""

    def __init__(self) -> None:
        self._sections: dict[int, tuple[BaseModel, dict[str, Any]]] = {}

    def dump(self, spec: BaseModel) -> dict[str, Any]:
        """`spec.model_dump(mode="json")`, its shared sections' dicts the memo's (read them, never change them)."""
        cls = type(spec)
        sections = _sections(cls)
        shared = {}
        for name, section in sections.items():
            value = getattr(spec, name)
            if type(value) is not section:  # a subclass, or None: pydantic dumps the whole spec
                return spec.model_dump(mode="json")
            shared[name] = self._section(value)
        # The rest is dumped by pydantic, the sections left out: a few plain values, cheap.
        node = spec.model_dump(mode="json", exclude=_section_names(cls))
        node.update(shared)
        return {name: node[name] for name in cls.model_fields}

    def _section(self, section: BaseModel) -> dict[str, Any]:
        entry = self._sections.get(id(section))
        if entry is None:
            entry = self._sections[id(section)] = (section, section.model_dump(mode="json"))
        return entry[1]


@functools.cache
def _section_names(cls: type[BaseModel]) -> dict[str, bool]:
    """model_dump's `exclude` of the sections (read only)."""
    return dict.fromkeys(_sections(cls), True)


@functools.cache
def _sections(cls: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """name -> model of each field of `cls` declared as one pydantic model (a section); read only."""
    return {
        name: field.annotation
        for name, field in cls.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    }
