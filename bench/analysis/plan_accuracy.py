"""Predicted next to measured for the ok records of a results folder.

    python -m bench.analysis.plan_accuracy RESULTS     # a markdown table and the median absolute error

For reports and for docs/results/planner.md's validation table: per point, predicted and measured
tokens/s per device, their relative error, the predicted step-time split beside the measured one
(profile.enabled: the profiled steps' compute / exposed communication / idle, metrics.step_breakdown)
and whether the counted communication bytes equal the planner's. The predicted exposed share that
compares with the measured one is exposed communication plus the overlapped communication the
planner charges back as interference (on CPU all of it: every collective is synchronous there).
Records with `metrics.peak_mem_by_category` (profile.memory_categories) get a table each below: FSDP2's
memory tracker beside the planner's breakdown, category by category (bench/analysis/memory_categories.py).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.analysis import memory_categories
from bench.analysis.planner.predict import predict
from bench.analysis.report.diagnosis import diagnose, predicted_comm_s
from bench.analysis.stats import rank_correlation
from bench.schema.labels import point_label


def compare_records(records, preflights=()) -> list[dict[str, Any]]:
    """One row per ok record: predicted vs measured throughput and communication bytes.

    `preflights`: plan each point from the preflight of its world shape (or, failing that, of its
    ranks per node) instead of the preset's links and the calibration."""
    rows = []
    for record in sorted(records, key=lambda r: (r.spec.nodes, r.spec.gpus_per_node, r.spec.strategy)):
        if record.status != "ok" or record.metrics.tokens_per_s_per_device is None:
            continue
        predicted = predict(record.spec, matching_preflight(record.spec, preflights))
        measured = record.metrics.tokens_per_s_per_device
        counted = record.metrics.comm_bytes_per_step
        memory, memory_kind = measured_memory(record)
        rows.append(
            {
                "point": point_label(predicted["spec"]),
                "predicted": predicted["tokens_per_s_per_device"],
                "measured": measured,
                "error": predicted["tokens_per_s_per_device"] / measured - 1,
                "split": predicted["step_time_split_s"],
                "predicted_exposed_share": (
                    predicted["step_time_split_s"]["exposed_comm"] + predicted["other_detail_s"]["comm_interference"]
                )
                / predicted["step_time_s"],
                "measured_split": record.metrics.step_breakdown,
                "comm_equal": counted is not None and counted.model_dump() == predicted["comm_bytes_per_step"],
                "memory_predicted": predicted["memory_bytes_per_device"]["total"],
                "memory_measured": memory,
                "memory_kind": memory_kind,
                "memory_categories": memory_categories.compare_record(record, predicted),
                "memory_moment": predicted["peak_memory_bytes"]["moment"],
            }
        )
    return rows


def matching_preflight(spec, preflights):
    """The preflight measured on this point's world shape, else one of its cluster and ranks per node."""
    from bench.analysis.planner.from_preflight import compatibility_problem

    usable = [p for p in preflights if compatibility_problem(spec, p) is None]
    same = [p for p in usable if p.spec.nodes == spec.nodes]
    return (same or usable or [None])[0]


def measured_memory(record) -> tuple[int | None, str]:
    """The measured peak the planner's per-device total compares with, and which statistic it is.

    The planner's total includes allocator fragmentation and the runtime's own footprint, so on a
    GPU it is compared with the allocator's peak reserved memory (what decides an out-of-memory
    error, and what torchtitan reports), not with peak allocated; on CPU with the peak resident set.
    """
    peak = record.metrics.peak_mem_bytes
    if peak is None:
        return None, "none"
    if peak.reserved_max is not None:
        return peak.reserved_max, "reserved"
    return peak.max, "allocated" if record.spec.device_type == "cuda" else "resident"


def efficiency_flag(prediction: dict[str, Any], measured_efficiency: float | None) -> str | None:
    """A one-line flag when measured scaling efficiency is > FLAG_POINTS below the prediction, with
    the likely cause; None otherwise. The logic lives in bench/analysis/report/diagnosis.py (one implementation)."""
    return diagnose(
        measured_efficiency,
        prediction.get("scaling_efficiency"),
        prediction.get("step_time_s"),
        predicted_comm_s(prediction),
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| point | predicted tok/s/device | measured | error | predicted compute / exposed comm / other (s) "
        "| measured compute / exposed comm / idle (s) | exposed share predicted / measured "
        "| comm bytes equal | memory predicted / measured (GiB) |",
        "|---|---:|---:|---:|---|---|---|---|---|",
    ]
    for r in rows:
        split = " / ".join(f"{r['split'][k]:.3f}" for k in ("compute", "exposed_comm", "other"))
        b = r["measured_split"]
        measured_split = "-" if b is None else " / ".join(f"{v:.3f}" for v in (b.compute_s, b.exposed_comm_s, b.idle_s))
        measured_share = "-" if b is None or b.exposed_comm_share is None else f"{100 * b.exposed_comm_share:.0f}%"
        shares = f"{100 * r['predicted_exposed_share']:.0f}% / {measured_share}"
        measured_gib = "-" if r["memory_measured"] is None else f"{r['memory_measured'] / 2**30:.2f} {r['memory_kind']}"
        lines.append(
            f"| {r['point']} | {r['predicted']:,.0f} | {r['measured']:,.0f} | {100 * r['error']:+.1f}% | "
            f"{split} | {measured_split} | {shares} | {'yes' if r['comm_equal'] else 'no'} | "
            f"{r['memory_predicted'] / 2**30:.2f} / {measured_gib} |"
        )
    if rows:
        lines.append(f"\nmedian absolute error: {100 * statistics.median(abs(r['error']) for r in rows):.1f}%")
        rho = rank_correlation([r["predicted"] for r in rows], [r["measured"] for r in rows])
        lines.append(f"Spearman rank correlation, predicted vs measured tokens/s per device: {rho:.2f}")
    for r in rows:
        if r["memory_categories"] is not None:
            title = (
                f"\n{r['point']}: memory by category, bytes per device (the planner's {r['memory_moment']} moment)\n"
            )
            lines.append(memory_categories.markdown(r["memory_categories"], title))
    return "\n".join(lines)


def main() -> None:
    from bench.analysis.records import load_records

    parser = argparse.ArgumentParser(description="predicted vs measured tokens/s for a results folder")
    parser.add_argument("results", type=Path)
    parser.add_argument(
        "--preflight", action="store_true", help="plan each point from the folder's preflight of its world shape"
    )
    args = parser.parse_args()
    records, problems = load_records(args.results)
    preflights = []
    if args.preflight:
        from bench.analysis.preflight import load_preflights

        preflights, unreadable = load_preflights(args.results)
        for path, reason in unreadable:
            print(f"skipped {path}: {reason}")
        if not preflights:
            parser.error(f"--preflight: no preflight record under {args.results}")
    for problem in problems:
        print(f"skipped {problem.path}: {problem.reason}")
    print(markdown(compare_records(records, preflights)))


if __name__ == "__main__":
    main()
