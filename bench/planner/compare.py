"""Predicted next to measured for the ok records of a results folder.

    python -m bench.planner.compare RESULTS     # a markdown table and the median absolute error

For reports and for the README's validation table: per point, predicted and measured
tokens/s per device, their relative error, the predicted step-time split and whether the
counted communication bytes equal the planner's.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.planner.predict import predict
from bench.planner.render import point_label
from reports.diagnosis import diagnose, predicted_comm_s


def compare_records(records) -> list[dict[str, Any]]:
    """One row per ok record: predicted vs measured throughput and communication bytes."""
    rows = []
    for record in sorted(records, key=lambda r: (r.spec.nodes, r.spec.gpus_per_node, r.spec.strategy)):
        if record.status != "ok" or record.metrics.tokens_per_s_per_device is None:
            continue
        predicted = predict(record.spec)
        measured = record.metrics.tokens_per_s_per_device
        counted = record.metrics.comm_bytes_per_step
        rows.append(
            {
                "point": point_label(predicted["spec"]),
                "predicted": predicted["tokens_per_s_per_device"],
                "measured": measured,
                "error": predicted["tokens_per_s_per_device"] / measured - 1,
                "split": predicted["step_time_split_s"],
                "comm_equal": counted is not None and counted.model_dump() == predicted["comm_bytes_per_step"],
            }
        )
    return rows


def efficiency_flag(prediction: dict[str, Any], measured_efficiency: float | None) -> str | None:
    """A one-line flag when measured scaling efficiency is > FLAG_POINTS below the prediction, with
    the likely cause; None otherwise. The logic lives in reports/diagnosis.py (one implementation)."""
    return diagnose(
        measured_efficiency,
        prediction.get("scaling_efficiency"),
        prediction.get("step_time_s"),
        predicted_comm_s(prediction),
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| point | predicted tok/s/device | measured | error | predicted compute / exposed comm / other (s) "
        "| comm bytes equal |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        split = " / ".join(f"{r['split'][k]:.3f}" for k in ("compute", "exposed_comm", "other"))
        lines.append(
            f"| {r['point']} | {r['predicted']:,.0f} | {r['measured']:,.0f} | {100 * r['error']:+.1f}% | "
            f"{split} | {'yes' if r['comm_equal'] else 'no'} |"
        )
    if rows:
        lines.append(f"\nmedian absolute error: {100 * statistics.median(abs(r['error']) for r in rows):.1f}%")
    return "\n".join(lines)


def main() -> None:
    from bench.records import load_records

    parser = argparse.ArgumentParser(description="predicted vs measured tokens/s for a results folder")
    parser.add_argument("results", type=Path)
    records, problems = load_records(parser.parse_args().results)
    for problem in problems:
        print(f"skipped {problem.path}: {problem.reason}")
    print(markdown(compare_records(records)))


if __name__ == "__main__":
    main()
