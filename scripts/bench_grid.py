#!/usr/bin/env python
"""Benchmark: how long a grid takes to validate (compose + pydantic + launch rules) and to plan.

Each grid size runs in a fresh interpreter, as `fsdp-bench plan` would (cold caches, Hydra
imported and composing from scratch); the imports are timed apart. The grids are planner grids on
p5.48xlarge nodes (8 GPUs each), growing by their scalar axes:

    models (5) x nodes (5) x strategies (5) x precisions (4) x micro-batches (5) x [grad_accum x checkpointing]

so every size has the same 100 group combinations (model x strategy x precision) and the growth
per point shows alone. `--reference-grid` adds a 1,260-point grid (4 models x 7 node counts x 5
strategies x 3 precisions x 3 micro-batches: 60 group combinations, the case separable group
choices are for). `--tree DIR` times another checkout (an older commit) with this interpreter.
Prints one Markdown row per grid: points, Hydra composes, wall and CPU seconds of validation and of
planning, and microseconds per point; then the least-squares line through the rows (a fixed part
plus a cost per point), which is how the cost grows with the grid.

    .venv/bin/python scripts/bench_grid.py                  # 2,500 to 20,000 points, ~1 minute
    .venv/bin/python scripts/bench_grid.py --sizes 10000 --reference-grid
    .venv/bin/python scripts/bench_grid.py --sizes 2500 --reference-grid --tree /tmp/main   # an older checkout
Exit 0 when the 10,000-point grid (or else the largest one measured) validates and plans within
--target seconds of wall time, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODELS = "llama2-7b,llama2-13b,llama2-70b,llama3-8b,tinyllama-1.1b"
BASE = ["cluster=p5.48xlarge", "gpus_per_node=8", f"model={MODELS}", "nodes=1,2,4,8,16",
        "strategy=full_shard,shard_grad_op,hybrid_shard,hybrid_shard_zero2,no_shard",
        "precision=fp32,bf16,bf16_pure,fp8"]  # fmt: skip
# Points per grid size: 2,500 (group x node combinations x micro-batches) times these scalar axes.
SCALAR_AXES = {
    2500: ["train.micro_batch=1,2,4,8,16"],
    5000: ["train.micro_batch=1,2,4,8,16", "train.grad_accum=1,2"],
    10000: ["train.micro_batch=1,2,4,8,16", "train.grad_accum=1,2,4,8"],
    20000: ["train.micro_batch=1,2,4,8,16", "train.grad_accum=1,2,4,8", "train.activation_checkpointing=none,full"],
}
TARGET_POINTS = 10000
REFERENCE_GRID = ["cluster=p5.48xlarge", "gpus_per_node=8", "model=llama2-7b,llama2-13b,llama2-70b,llama3-8b",
              "nodes=1,2,4,8,16,32,64", "strategy=full_shard,shard_grad_op,hybrid_shard,hybrid_shard_zero2,no_shard",
              "precision=fp32,bf16,bf16_pure", "train.micro_batch=1,2,4"]  # fmt: skip

# Runs in the child: times imports, validation and planning of one grid; prints JSON.
CHILD = r"""
import inspect, json, sys, time
sys.path.insert(0, sys.argv[2])
clock = lambda: (time.perf_counter(), time.process_time())
t0 = clock()
import hydra, omegaconf, pydantic
from bench.config import compose as config
from bench.analysis.planner import predict, with_scaling_efficiency
assert config.__file__.startswith(sys.argv[2]), config.__file__
t1 = clock()
points = config.load_grid(json.loads(sys.argv[1]))
t2 = clock()
specs = [point.spec for point in points]
# Older trees' with_scaling_efficiency validates the specs again itself (no `specs` argument).
given = (specs,) if "specs" in inspect.signature(with_scaling_efficiency).parameters else ()
predictions = with_scaling_efficiency([predict(spec) for spec in specs], *given)
t3 = clock()
assert len(predictions) == len(points)
print(json.dumps({
    "points": len(points),
    "composes": config.compose_groups.cache_info().misses,
    "import": [t1[0] - t0[0], t1[1] - t0[1]],
    "validate": [t2[0] - t1[0], t2[1] - t1[1]],
    "plan": [t3[0] - t2[0], t3[1] - t2[1]],
}))
"""


def measure(overrides: list[str], tree: Path = ROOT) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(overrides), str(tree)], cwd=tree, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=sorted(SCALAR_AXES), choices=sorted(SCALAR_AXES))
    parser.add_argument("--reference-grid", action="store_true", help="also the 1,260-point reference grid")
    parser.add_argument("--target", type=float, default=10.0, help="seconds the 10,000-point grid may take (wall)")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="time another checkout's bench/ with this interpreter (e.g. `git archive main | tar -x -C DIR`)",
    )
    args = parser.parse_args()

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print("| grid | points | Hydra composes | import s | validate s (wall / CPU) | plan s (wall / CPU) "
          "| validate + plan s (wall / CPU) | us per point (wall) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    grids = [(f"{size:,}", BASE + SCALAR_AXES[size]) for size in args.sizes]
    grids += [("reference (1,260)", REFERENCE_GRID)] * args.reference_grid
    for name, overrides in grids:
        r = measure(overrides, args.tree.resolve())
        total = [r["validate"][i] + r["plan"][i] for i in (0, 1)]
        per_point = 1e6 * total[0] / r["points"]
        print(
            f"| {name} | {r['points']:,} | {r['composes']} | {r['import'][0]:.2f} | "
            f"{r['validate'][0]:.2f} / {r['validate'][1]:.2f} | {r['plan'][0]:.2f} / {r['plan'][1]:.2f} | "
            f"{total[0]:.2f} / {total[1]:.2f} | {per_point:,.0f} |",
            flush=True,
        )
        if not name.startswith("reference"):
            rows.append((r["points"], total))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if len(rows) > 1:
        for label, index in (("wall", 0), ("CPU", 1)):
            fixed, slope = fit_line([p for p, _ in rows], [t[index] for _, t in rows])
            print(f"{label}: validate + plan = {fixed:.2f} s + {1e6 * slope:,.0f} us x points (least squares)")
    judged = next((row for row in rows if row[0] == TARGET_POINTS), max(rows, key=lambda row: row[0]))
    ok = judged[1][0] <= args.target
    print(
        f"{judged[0]:,} points in {judged[1][0]:.2f} s wall: {'within' if ok else 'over'} the {args.target:g} s target"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
