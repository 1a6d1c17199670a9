"""FSDP2's memory tracker beside the planner, category by category (profile.memory_categories).

A record with `metrics.peak_mem_by_category` holds the tracker's categories at the moment of its
total's peak (fsdp_core/memory_categories.py); the planner's breakdown is the one at its own peak
moment (`memory_bytes_per_device`, `peak_memory_bytes` of `bench.analysis.planner.predict`). `PAIRS`
is the one mapping between the two; `compare` returns a row per pair, with the known reason where
they differ. Shown by `python -m bench.analysis.plan_accuracy` and scripts/memory_categories_grid.py.
Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.analysis.planner import predict


@dataclass(frozen=True)
class Pair:
    """Tracker categories against planner components: each side's bytes are the sum of its names."""

    label: str
    short: str  # the column's name in a grid's table
    tracked: tuple[str, ...]
    planned: tuple[str, ...]  # empty: the planner has no such component
    # Why the two differ where the reason is known: keyed "<moment>/<over|under>", "<moment>" or
    # "<over|under>" (the most specific first), the moment the planner's peak (`loss`: cross-entropy's
    # backward; `backward`: the blocks' backward; `root_reduce`: the root's reduce-scatter after them,
    # bench/analysis/planner/memory.py) and over/under
    # whether the tracker measured more or less than predicted.
    reasons: dict[str, str] = field(default_factory=dict)


# "Total" compares with the planner's allocator-visible peak (`peak_memory_bytes.allocated`: every
# component but headroom); Buffer (the RoPE tables) has no planner component. All Gather joins Unsharded
# Param: a block being prefetched is in its all-gather buffer, and the planner counts it whole. Inputs
# (the token ids, freed by the peak in every point measured) is in the tracker's Total only.
PAIRS: tuple[Pair, ...] = (
    Pair("Sharded Param / params", "sharded param", ("Sharded Param",), ("params",)),
    Pair(
        "Unsharded Param + All Gather / unsharded_params",
        "unsharded param + AG",
        ("Unsharded Param", "All Gather"),
        ("unsharded_params",),
        {
            "backward/under": "the planner counts the root and two blocks whole during the blocks' backward "
            "(every block without resharding); at the tracker's peak fewer were (none once backward is over)"
        },
    ),
    Pair(
        "OptState / optimizer",
        "optimizer",
        ("OptState",),
        ("optimizer",),
        {
            "over": "AdamW's step counters (4 bytes per parameter tensor), which the planner leaves out; more "
            "than those: a parameter-sized temporary of the optimizer step, where the tracker's peak fell"
        },
    ),
    Pair(
        "Sharded Grad / grads",
        "sharded grad",
        ("Sharded Grad",),
        ("grads",),
        {
            "loss/under": "the planner counts sharded grads at both moments on purpose (they live across "
            "micro-steps under grad_accum); with grad_accum=1, zero_grad(set_to_none=True) freed them "
            "before the forward",
            "backward/under": "the planner counts every sharded grad (gradient accumulation); with "
            "grad_accum=1 only those already reduce-scattered exist at the tracker's peak",
            "root_reduce/under": "the planner counts every sharded grad (gradient accumulation); with "
            "grad_accum=1 the root's do not exist before its reduce-scatter ends",
        },
    ),
    Pair(
        "Unsharded Grad + Reduce Scatter / unsharded_grads",
        "unsharded grad + RS",
        ("Unsharded Grad", "Reduce Scatter"),
        ("unsharded_grads",),
        {
            "backward/under": "the planner counts the output projection's and two blocks' whole gradients at "
            "once; at the tracker's peak fewer were (autograd's fresh ones are in Temp)",
            "backward/over": "the tracker's peak fell at the root's reduce-scatter (the embedding's and output's "
            "whole gradients in its buffer), the planner's root_reduce moment, which held less here",
            "root_reduce/under": "the planner counts the reduce-scatter's output and gloo's copy of its input "
            "here, the tracker in Temp; its Unsharded Grad is the output projection's gradient, which the "
            "tracker's own post-backward wrapper keeps alive through the reduce-scatter",
        },
    ),
    Pair(
        "Activation + Temp / activations + logits",
        "activation + temp",
        ("Activation", "Temp"),
        ("activations", "logits"),
        {
            "backward/over": "Temp holds, by the sums, whole gradients autograd produced before FSDP's "
            "reduce-scatter took them, which the planner counts in unsharded_grads",
            "backward/under": "the tracker's peak fell after the blocks' backward, the activations freed",
            "root_reduce/over": "Temp holds the reduce-scatter's output and gloo's copy of its input, which "
            "the planner counts in unsharded_grads",
        },
    ),
    Pair("Buffer / -", "buffer", ("Buffer",), (), {"over": "the RoPE tables (buffers), which the planner leaves out"}),
    Pair(
        "Total / allocated",
        "total",
        ("Total",),
        ("allocated",),
        {
            "loss/under": "the sum of the rows above: mostly the sharded grads the planner keeps on purpose",
            "backward/under": "the sum of the rows above: the planner's backward moment adds maxima the step "
            "reaches at different times (conservative on purpose)",
            "root_reduce/over": "the sum of the rows above: the RoPE buffer, the step counters and the "
            "gradient the tracker itself keeps alive, above the root's sharded grads the planner keeps on purpose",
        },
    ),
)


@dataclass(frozen=True)
class Row:
    pair: str
    measured: int
    predicted: int | None  # None: the planner has no such component
    difference: int  # measured - predicted (measured where nothing is predicted)
    reason: str | None  # the known reason where they differ, else None


def predicted_components(prediction: dict[str, Any]) -> dict[str, int]:
    """The planner's components at its peak moment, `allocated` among them (a `predict` result)."""
    return {**prediction["memory_bytes_per_device"], "allocated": prediction["peak_memory_bytes"]["allocated"]}


def compare(categories: dict[str, int], prediction: dict[str, Any]) -> list[Row]:
    """One row per `PAIRS` entry: the tracker's `categories` (a record's metrics.peak_mem_by_category)
    against `prediction` (bench.analysis.planner.predict of the record's spec)."""
    planner = predicted_components(prediction)
    moment = prediction["peak_memory_bytes"]["moment"]
    rows = []
    for pair in PAIRS:
        measured = sum(categories.get(name, 0) for name in pair.tracked)
        predicted = sum(planner[name] for name in pair.planned) if pair.planned else None
        difference = measured - (predicted or 0)
        reason = reason_for(pair, moment, difference)
        rows.append(Row(pair.label, measured, predicted, difference, reason))
    return rows


def reason_for(pair: Pair, moment: str, difference: int) -> str | None:
    """The known reason for a pair's difference (None when they agree or the reason is unknown)."""
    if not difference:
        return None
    side = "over" if difference > 0 else "under"
    return next((pair.reasons[k] for k in (f"{moment}/{side}", moment, side) if k in pair.reasons), None)


def compare_record(record, prediction: dict[str, Any] | None = None) -> list[Row] | None:
    """`compare` for a RunResult (its spec planned unless `prediction` is given); None without categories."""
    categories = record.metrics.peak_mem_by_category if record.metrics is not None else None
    if not categories:
        return None
    if prediction is None:
        prediction = predict(record.spec)
    return compare(categories, prediction)


def markdown(rows: list[Row], title: str = "") -> str:
    """A record's comparison as a markdown table (bytes per device, the largest rank's)."""
    lines = [title] if title else []
    lines += ["| tracker / planner | measured | predicted | difference | why |", "|---|---:|---:|---:|---|"]
    for r in rows:
        predicted = "-" if r.predicted is None else f"{r.predicted:,}"
        lines.append(f"| {r.pair} | {r.measured:,} | {predicted} | {r.difference:+,} | {r.reason or ''} |")
    return "\n".join(lines)


def grid_markdown(points: list[tuple[str, str, list[Row]]]) -> str:
    """Points (label, the planner's peak moment, rows) as one table: a column per pair, measured / predicted."""
    header = ["point", "planner moment", *(pair.short for pair in PAIRS)]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * len(PAIRS)]
    for label, moment, rows in points:
        cells = [f"{r.measured:,} / {'-' if r.predicted is None else f'{r.predicted:,}'}" for r in rows]
        lines.append("| " + " | ".join([label, moment, *cells]) + " |")
    return "\n".join(lines)
