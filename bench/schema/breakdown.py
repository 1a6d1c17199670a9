"""`metrics.step_breakdown` of a record: the profiled steps' split into compute, exposed communication
and idle (profile.enabled; fsdp_core/step_split.py measures it from each rank's own trace).

Plain lists per rank, not a model per rank: every record of a large report is validated.
"""

from __future__ import annotations

import statistics

from pydantic import Field

from bench.schema.base import Strict

# The parts, in seconds: compute + exposed_comm + idle = step; overlapped + exposed = comm; fsdp and
# barrier are parts of idle (null on a GPU, where they are host-side).
# The operations summary keeps the TOP_OPS names by self time, and every name with one of these
# prefixes (FSDP's ranges, the collective calls and gloo's spans): what a slowdown is read against.
TOP_OPS = 30
KEPT_OP_PREFIXES = ("FSDP::", "c10d::", "gloo:", "nccl:", "record_param_comms")
PARTS = ("step_s", "compute_s", "comm_s", "overlapped_comm_s", "exposed_comm_s", "idle_s", "fsdp_s", "barrier_s")


class StepBreakdown(Strict):
    """Each part is the median over ranks of each rank's median over its profiled steps; the
    `_per_rank` lists hold those per-rank medians in rank order."""

    device: str | None = Field(None, description="cpu (gloo spans, ops) or cuda (kernels on their streams)")
    steps: int = Field(description="profiled steps per rank")
    step_s: float | None = None
    compute_s: float | None = None
    comm_s: float | None = None
    overlapped_comm_s: float | None = None
    exposed_comm_s: float | None = None
    idle_s: float | None = None
    fsdp_s: float | None = Field(None, description="idle inside FSDP's ranges, no collective running (CPU)")
    barrier_s: float | None = Field(None, description="idle in the step timer's barriers (CPU)")
    exposed_comm_share: float | None = Field(None, description="exposed_comm_s / step_s")
    step_s_per_rank: list[float | None] = Field(default_factory=list)
    compute_s_per_rank: list[float | None] = Field(default_factory=list)
    comm_s_per_rank: list[float | None] = Field(default_factory=list)
    overlapped_comm_s_per_rank: list[float | None] = Field(default_factory=list)
    exposed_comm_s_per_rank: list[float | None] = Field(default_factory=list)
    idle_s_per_rank: list[float | None] = Field(default_factory=list)
    fsdp_s_per_rank: list[float | None] = Field(default_factory=list)
    barrier_s_per_rank: list[float | None] = Field(default_factory=list)
    comm_s_by_kind: dict[str, float] = Field(default_factory=dict, description="all_gather, reduce_scatter, ...")
    exposed_comm_s_by_kind: dict[str, float] = Field(default_factory=dict)
    calls_per_step: dict[str, int] = Field(default_factory=dict, description="collective calls per step, by kind")
    timer_step_s: float | None = Field(
        None, description="the step timer's median time of the same profiled steps (slowest rank)"
    )
    export_s: float | None = Field(None, description="exporting the trace (slowest rank)")
    trace_bytes_per_rank: list[int] = Field(default_factory=list, description="each trace's JSON, uncompressed")
    trace_gzip_bytes_per_rank: list[int] = Field(default_factory=list, description="each trace file's size")
    traces: list[str] = Field(default_factory=list, description="the trace files beside the record, rank order")
    missing: dict[str, str] = Field(default_factory=dict)
    ops: dict[str, list[float]] = Field(
        default_factory=dict,
        description="host operation -> [calls per step, self time per step (s)]: the top by self time, FSDP's "
        "ranges and the collectives (median over ranks)",
    )


def _median(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def op_summary(ranks: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    """Each operation's calls and self time per step, the median over the ranks (a rank without it: 0),
    kept as TOP_OPS and KEPT_OP_PREFIXES say."""
    names = sorted({name for r in ranks for name in r})
    if not names:
        return {}
    merged = {n: [_median([(r.get(n) or (0, 0.0))[i] for r in ranks]) or 0.0 for i in (0, 1)] for n in names}
    top = sorted(names, key=lambda n: -merged[n][1])[:TOP_OPS]
    kept = set(top) | {n for n in names if n.startswith(KEPT_OP_PREFIXES)}
    return {n: [round(merged[n][0], 3), merged[n][1]] for n in sorted(kept)}


def breakdown_of(ranks: list[dict], steps: int) -> StepBreakdown:
    """The record's section from every rank's medians (fsdp_core/step_split.rank_medians, plus
    `timer_step_s`, `export_s`, `trace`, `trace_bytes`, `gzip_bytes` and `missing`), in rank order."""
    fields: dict = {f"{part}_per_rank": [r.get(part) for r in ranks] for part in PARTS}
    fields.update({part: _median(fields[f"{part}_per_rank"]) for part in PARTS})
    for key in ("comm_s_by_kind", "exposed_comm_s_by_kind"):
        names = sorted({n for r in ranks for n in r.get(key, {})})
        fields[key] = {n: _median([r.get(key, {}).get(n, 0.0) for r in ranks]) for n in names}
    names = sorted({n for r in ranks for n in r.get("calls", {})})
    fields["calls_per_step"] = {n: int(round(_median([r.get("calls", {}).get(n, 0) for r in ranks]))) for n in names}
    fields["ops"] = op_summary([r.get("ops") or {} for r in ranks])
    step, exposed = fields["step_s"], fields["exposed_comm_s"]
    missing: dict[str, str] = {}
    for r in ranks:
        missing.update(r.get("missing") or {})
    timers = [r["timer_step_s"] for r in ranks if r.get("timer_step_s") is not None]
    exports = [r["export_s"] for r in ranks if r.get("export_s") is not None]
    return StepBreakdown(
        device=next((r.get("device") for r in ranks if r.get("device")), None),
        steps=steps,
        exposed_comm_share=exposed / step if step and exposed is not None else None,
        timer_step_s=max(timers) if timers else None,
        export_s=max(exports) if exports else None,
        trace_bytes_per_rank=[int(r.get("trace_bytes") or 0) for r in ranks],
        trace_gzip_bytes_per_rank=[int(r.get("gzip_bytes") or 0) for r in ranks],
        traces=[r["trace"] for r in ranks if r.get("trace")],
        missing=missing,
        **fields,
    )
