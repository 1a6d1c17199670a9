#!/usr/bin/env python
"""FSDP2's memory tracker against the planner over a grid: one markdown table, tracker / planner per pair.

Runs `fsdp-bench sweep` on one node of 2 CPU ranks with profile.memory_categories=true, every
sharding strategy and every activation-checkpointing mode, `debug` and `tiny` (fp32, sequence 64,
micro-batch 2, 2 steps of which 1 warm-up), then compares each record's `metrics.peak_mem_by_category`
with the planner's breakdown at its peak moment (bench/analysis/memory_categories.py). The records
are real ones, written by the launcher and the worker as any sweep's are; a rerun into the same
folder resumes (points already ok are not run again).

    .venv/bin/python scripts/memory_categories_grid.py                  # into /tmp/memory_categories_grid
    .venv/bin/python scripts/memory_categories_grid.py --results DIR --no-run   # only the table
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from bench.analysis.memory_categories import compare_record, grid_markdown
from bench.analysis.planner import predict
from bench.analysis.records import load_records
from bench.schema.ac_modes import AC_MODES
from bench.schema.labels import point_label
from bench.schema.recipes import STRATEGIES

SWEEP = "memory_categories"
FIXED = (
    "gpus_per_node=2", "precision=fp32", "train.seq_len=64", "train.micro_batch=2", "train.steps=2",
    "train.warmup_steps=1", "profile.memory_categories=true", "report=false", f"sweep.name={SWEEP}",
)  # fmt: skip


def run_grid(results: Path, models: str) -> None:
    overrides = [
        f"model={models}",
        f"strategy={','.join(STRATEGIES)}",
        f"train.activation_checkpointing={','.join(AC_MODES)}",
        f"results_dir={results}",
        *FIXED,
    ]
    subprocess.run([sys.executable, "-m", "bench.cli.main", "sweep", *overrides], check=True)


def table(results: Path) -> str:
    records, problems = load_records(results / SWEEP)
    for problem in problems:
        print(f"skipped {problem.path}: {problem.reason}", file=sys.stderr)
    points = []
    order = {name: i for i, name in enumerate(STRATEGIES)}
    for record in sorted(
        records,
        key=lambda r: (
            r.spec.model.name,
            order[r.spec.strategy],
            AC_MODES.index(r.spec.train.activation_checkpointing),
        ),
    ):
        if record.status != "ok":
            print(f"{record.point_id}: {record.status}", file=sys.stderr)
            continue
        prediction = predict(record.spec)
        rows = compare_record(record, prediction)
        if rows is None:
            print(f"{record.point_id}: no metrics.peak_mem_by_category", file=sys.stderr)
            continue
        points.append((point_label(prediction["spec"]), prediction["peak_memory_bytes"]["moment"], rows))
    return grid_markdown(points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("/tmp/memory_categories_grid"))
    parser.add_argument("--models", default="debug,tiny", help="comma-separated model flavors")
    parser.add_argument("--no-run", action="store_true", help="tabulate the records already in --results")
    args = parser.parse_args()
    if not args.no_run:
        run_grid(args.results, args.models)
    print(table(args.results))


if __name__ == "__main__":
    main()
