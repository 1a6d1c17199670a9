"""The planner against published FSDP figures: per-row throughput, per-series scaling, the p5 anchor.

Data: bench/analysis/planner/data/published_calibration.csv (llm-foundry MPT rows and torchtitan
Llama-3.1-8B rows on H100, sources in its `source` column; bench/analysis/planner/data/README.md); the
torchtitan rows also give the peak memory, and two fp8 rows. Every row runs on 8-GPU H100 nodes with
400 Gb/s per GPU of RDMA network (torchtitan states it; llm-foundry's H100 cluster is an
8x400G InfiniBand cluster of the same kind), so throughput rows are planned on the `h100-8x`
preset (NVLink 3600 Gb/s per GPU, 3200 Gb/s per node; the SXM peaks, which torchtitan's own MFU
uses for its 500 W parts too). Each row is a Workload with the row's model, GPU count, sequence,
micro-batch, checkpointing, precision and compile setting; grad_accum is not published and is
taken as 1 (it moves only the optimizer's small share of the step). Memory rows are checked for
fit on the hardware they ran on (`HARDWARE_CLUSTERS`).
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from bench.analysis.planner.shapes import MPT_DIMS, llama_shape, mpt_shape
from bench.analysis.planner.step import tokens_per_s_per_device
from bench.analysis.planner.workload import Workload

CSV_PATH = Path(__file__).resolve().parent / "data" / "published_calibration.csv"
PUBLISHED_CLUSTER = "h100-8x"


@dataclass(frozen=True)
class PublishedRow:
    source: str
    hardware: str
    model: str
    gpus: int
    nodes: int
    seq_len: int
    micro_batch: int
    activation_checkpointing: str
    precision: str
    compile: bool
    tokens_per_s_per_gpu: float
    mfu: float | None
    memory_gib: float | None = None  # the allocator's peak reserved memory per GPU, where published

    @property
    def series(self) -> str:
        """Rows that differ only in GPU count form one scaling series."""
        tool = self.source.split()[0]
        precision = "" if self.precision == "bf16" else f" {self.precision}"
        return f"{tool} {self.model}{' compile' if self.compile else ''}{precision}"


def load_rows(path: Path = CSV_PATH) -> list[PublishedRow]:
    with path.open(newline="") as handle:
        return [
            PublishedRow(
                source=r["source"],
                hardware=r["hardware"],
                model=r["model"],
                gpus=int(r["gpus"]),
                nodes=int(r["nodes"]),
                seq_len=int(r["seq_len"]),
                micro_batch=int(r["micro_batch"]),
                activation_checkpointing=r["ac"],
                precision=r["precision"],
                compile=r["compile"] == "yes",
                tokens_per_s_per_gpu=float(r["tokens_per_s_per_gpu"]),
                mfu=float(r["mfu"]) if r["mfu"] else None,
                memory_gib=float(r["memory_gib"]) if r["memory_gib"] else None,
            )
            for r in csv.DictReader(handle)
        ]


def row_workload(row: PublishedRow, cluster: str = PUBLISHED_CLUSTER) -> Workload:
    """The planner's Workload for a published row (full_shard, the row's precision with fp32 reduction)."""
    from bench.config.compose import load_preset

    shape = mpt_shape(row.model, row.seq_len) if row.model in MPT_DIMS else llama_shape(load_preset("model", row.model))
    return Workload(
        shape=shape,
        cluster=load_preset("cluster", cluster),
        nodes=row.nodes,
        gpus_per_node=row.gpus // row.nodes,
        strategy="full_shard",
        precision=row.precision,
        seq_len=row.seq_len,
        micro_batch=row.micro_batch,
        activation_checkpointing=row.activation_checkpointing,
        compile=row.compile,
    )


def fit_rows(rows: list[PublishedRow]) -> list[PublishedRow]:
    """The rows the GPU constants are fitted to: bf16 (fp8 rows check bench/analysis/planner/fp8.py)."""
    return [r for r in rows if r.precision == "bf16"]


def fp8_table(rows: list[PublishedRow]) -> list[dict[str, object]]:
    """Per fp8 row: its throughput error, and its speed-up over the bf16 row it pairs with (same
    model, GPUs and compile setting), predicted and published."""
    bf16 = {(r.model, r.gpus, r.compile): r for r in fit_rows(rows)}
    table = []
    for row in rows:
        base = bf16.get((row.model, row.gpus, row.compile))
        if row.precision != "fp8" or base is None:
            continue
        entry, base_entry = throughput_entry(row), throughput_entry(base)
        entry["base_error"] = base_entry["error"]
        entry["speedup_predicted"] = entry["predicted"] / base_entry["predicted"]
        entry["speedup_published"] = row.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu
        table.append(entry)
    return table


# The cluster each row's hardware ran on, for its capacity (the memory table's "fits").
HARDWARE_CLUSTERS = {"h100-sxm": "h100-8x", "h100-96gb": "h100-96gb-8x"}


def memory_table(rows: list[PublishedRow]) -> list[dict[str, object]]:
    """Per row with a published memory peak: the planner's peak reserved bytes against it, and
    whether the planner says the configuration fits on the hardware it ran on, with the margin."""
    from bench.analysis.planner.memory import device_memory_bytes, memory_breakdown, peak_memory

    table = []
    for row in rows:
        if row.memory_gib is None:
            continue
        workload = row_workload(row, HARDWARE_CLUSTERS[row.hardware])
        peak = peak_memory(workload)
        total = memory_breakdown(workload)["total"]
        capacity = device_memory_bytes(workload)
        table.append(
            {
                "series": row.series,
                "gpus": row.gpus,
                "moment": peak["moment"],
                "allocated_gib": peak["allocated"] / 2**30,
                "predicted_gib": peak["reserved"] / 2**30,
                "published_gib": row.memory_gib,
                "error": peak["reserved"] / 2**30 / row.memory_gib - 1,
                "fits": total <= capacity,
                "margin_gib": (capacity - total) / 2**30,
            }
        )
    return table


def hardware_efficiency(rows: list[PublishedRow], hardware: str) -> float:
    """Median published/predicted throughput of the bf16 rows run on `hardware`, planned on the
    H100 SXM cluster: what a device file's `relative_efficiency` is for parts without a datasheet peak."""
    table = throughput_table([r for r in fit_rows(rows) if r.hardware == hardware])
    return statistics.median(float(e["published"]) / float(e["predicted"]) for e in table)


def throughput_entry(row: PublishedRow) -> dict[str, object]:
    """One row's predicted and published tokens/s per GPU and the relative error."""
    predicted = tokens_per_s_per_device(row_workload(row))
    return {
        "series": row.series,
        "gpus": row.gpus,
        "predicted": predicted,
        "published": row.tokens_per_s_per_gpu,
        "error": predicted / row.tokens_per_s_per_gpu - 1,
    }


def throughput_table(rows: list[PublishedRow]) -> list[dict[str, object]]:
    """Per row: predicted and published tokens/s per GPU and the relative error."""
    return [throughput_entry(row) for row in rows]


def scaling_table(throughput: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per series: efficiency of its largest GPU count against its smallest, predicted and published."""
    series: dict[str, list[dict[str, object]]] = {}
    for entry in throughput:
        series.setdefault(str(entry["series"]), []).append(entry)
    table = []
    for name, entries in series.items():
        small = min(entries, key=lambda e: e["gpus"])
        large = max(entries, key=lambda e: e["gpus"])
        if small is large:
            continue
        predicted = large["predicted"] / small["predicted"]
        published = large["published"] / small["published"]
        table.append(
            {
                "series": name,
                "gpus": f"{small['gpus']}->{large['gpus']}",
                "predicted": predicted,
                "published": published,
                "error_pp": 100 * (predicted - published),
            }
        )
    return table


def median_abs_error(throughput: list[dict[str, object]]) -> float:
    return statistics.median(abs(float(e["error"])) for e in throughput)


# The anchor (bench/analysis/planner/data/README.md): Llama-2 FSDP fine-tuning on up to 16
# p5.48xlarge nodes, about 87% scaling efficiency at 16 nodes, with llama-recipes' defaults.
ANCHOR_NODES = (1, 2, 4, 8, 16)


def anchor_table(
    models: tuple[str, ...] = ("llama2-7b", "llama2-13b", "llama2-70b"), micro_batches: tuple[int, ...] = (1, 4)
) -> list[dict[str, object]]:
    """Predicted 16-node scaling on p5.48xlarge under llama-recipes' defaults: FULL_SHARD, pure bf16
    (parameters, gradients and reduction), full activation checkpointing, packed context 4096,
    weak scaling from the smallest node count that fits (micro-batch 1, the eks_llama2 experiment's
    setting, and 4, llama-recipes' default batch_size_training)."""
    from bench.analysis.planner.predict import predict
    from bench.config.compose import spec_from_fields

    table = []
    for model in models:
        for micro_batch in micro_batches:
            points = []
            for nodes in ANCHOR_NODES:
                spec = spec_from_fields(
                    model=model,
                    nodes=nodes,
                    gpus_per_node=8,
                    strategy="full_shard",
                    precision="bf16_pure",
                    cluster="p5.48xlarge",
                    launcher="kubeflow",
                    seq_len=4096,
                    micro_batch=micro_batch,
                    activation_checkpointing="full",
                )
                points.append(predict(spec))
            fitting = [p for p in points if p["fits"]]
            if not fitting or fitting[-1]["spec"]["nodes"] != ANCHOR_NODES[-1]:
                continue
            base, top = fitting[0], fitting[-1]
            table.append(
                {
                    "model": model,
                    "micro_batch": micro_batch,
                    "baseline_nodes": base["spec"]["nodes"],
                    "efficiency": top["tokens_per_s_per_device"] / base["tokens_per_s_per_device"],
                    "tokens_per_s_per_gpu": top["tokens_per_s_per_device"],
                    "mfu": top["mfu"],
                    "exposed_comm_share": top["step_time_split_s"]["exposed_comm"] / top["step_time_s"],
                }
            )
    return table


# The configuration axes a published setup's rank is taken over (bench/analysis/planner/search.py's, on a
# Workload: the MPT rows are calibration-only shapes `fsdp-bench run` cannot compose). Precision
# stays the published bf16: fp8 is modelled but not calibrated.
def rank_space(row: PublishedRow) -> list[Workload]:
    """Every configuration of the row's setup: strategy x micro-batch x checkpointing x compile."""
    from bench.analysis.planner.search import DEFAULT_MICRO_BATCHES
    from bench.schema.recipes import STRATEGIES
    from bench.schema.spec import CHECKPOINTING

    base = row_workload(row)
    micro_batches = sorted({row.micro_batch, *map(int, DEFAULT_MICRO_BATCHES)})
    return [
        replace(base, strategy=s, micro_batch=m, activation_checkpointing=ac, compile=c)
        for s in STRATEGIES
        for m in micro_batches
        for ac in CHECKPOINTING
        for c in (False, True)
    ]


def published_ranks(rows: list[PublishedRow]) -> list[dict[str, object]]:
    """Per published row: the rank the planner gives the published configuration among the
    configurations of its setup that fit (by predicted tokens/s), over the whole space and with
    compile held as published, and the planner's best of the whole space."""
    from bench.analysis.planner.memory import fits, memory_breakdown
    from bench.schema.units import GIB

    table = []
    for row in rows:
        published = row_workload(row)
        mine = tokens_per_s_per_device(published)
        fitting = [(w, tokens_per_s_per_device(w)) for w in rank_space(row) if fits(w)]
        same_compile = [speed for w, speed in fitting if w.compile == row.compile]
        best, best_speed = max(fitting, key=lambda pair: pair[1])
        table.append(
            {
                "series": row.series,
                "gpus": row.gpus,
                "published": _describe(published),
                "fits": fits(published),
                "memory_gib": memory_breakdown(published)["total"] / GIB,
                "rank": 1 + sum(speed > mine for _, speed in fitting),
                "of": len(fitting),
                "rank_same_compile": 1 + sum(speed > mine for speed in same_compile),
                "of_same_compile": len(same_compile),
                "best": _describe(best),
                "best_gain": best_speed / mine - 1,
            }
        )
    return table


def _describe(w: Workload) -> str:
    return f"{w.strategy} mb={w.micro_batch} ac={w.activation_checkpointing}{' compile' if w.compile else ''}"
