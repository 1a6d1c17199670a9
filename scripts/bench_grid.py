#!/usr/bin/env python
"""Benchmark: how long a grid takes to validate (compose + pydantic + launch rules) and to plan,
and how long the real `fsdp-bench plan` command line takes on a 10,080-point grid.

Each grid size runs in a fresh interpreter, as `fsdp-bench plan` would (cold caches, Hydra
imported and composing from scratch); the imports are timed apart. The grids are planner grids on
p5.48xlarge nodes (8 GPUs each), growing by their scalar axes:

    models (5) x nodes (5) x strategies (5) x precisions (4) x micro-batches (5) x [grad_accum x checkpointing]

so every size has the same 100 group combinations (model x strategy x precision) and the growth
per point shows alone. `--reference-grid` adds a 1,260-point grid (4 models x 7 node counts x 5
strategies x 3 precisions x 3 micro-batches: 60 group combinations, the case separable group
choices are for). `--tree DIR` times another checkout (an older commit) with this interpreter.
`--command-grid` adds the 10,080-point grid `--command` times (below). Prints one Markdown row per
grid: points, Hydra composes, wall and CPU seconds of validation, of planning and of the `--json`
text, and microseconds per point (validation and planning); then the least-squares line through
the rows (a fixed part plus a cost per point), which is how the cost grows with the grid.

    .venv/bin/python scripts/bench_grid.py                  # 2,500 to 20,000 points
    .venv/bin/python scripts/bench_grid.py --sizes 10000 --reference-grid
    .venv/bin/python scripts/bench_grid.py --sizes --command-grid --tree /tmp/main   # where `plan`'s time goes
    .venv/bin/python scripts/bench_grid.py --sizes 2500 --reference-grid --tree /tmp/main   # an older checkout

`--command` times the real command line instead, `fsdp-bench plan GRID --json` and the table form
`fsdp-bench plan GRID` of a 10,080-point grid (the reference grid x 4 grad_accum values x 2
checkpointing modes), output to /dev/null, each run in a fresh interpreter, --repeats runs per form
(3), this tree's and --tree's runs interleaved so both see the same load; it prints the median
wall and CPU seconds of each and the ratio (the other tree over this one):

    .venv/bin/python scripts/bench_grid.py --command --tree /tmp/main     # before (DIR) and after (here)
Exit 0 when the 10,000-point grid (or else the largest one measured) validates and plans within
--target seconds of wall time, else 1; with --command, when both forms take at most
--command-target seconds (median wall) in this tree.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
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

# `--command`: the reference grid x grad_accum x checkpointing, 1,260 x 4 x 2 = 10,080 points.
COMMAND_GRID = [*REFERENCE_GRID, "train.grad_accum=1,2,4,8", "train.activation_checkpointing=none,full"]
COMMAND_FORMS = {"--json": ["--json"], "table": []}

# Runs in the child: times imports, validation, planning (what `plan` computes: predictions, scaling
# efficiency and, where the tree has them, plan objects) and the `--json` text of one grid; prints JSON.
CHILD = r"""
import inspect, json, sys, time
sys.path.insert(0, sys.argv[2])
clock = lambda: (time.perf_counter(), time.process_time())
t0 = clock()
import hydra, omegaconf, pydantic
from bench.config import compose as config
from bench.analysis import planner
assert config.__file__.startswith(sys.argv[2]), config.__file__
t1 = clock()
points = config.load_grid(json.loads(sys.argv[1]))
t2 = clock()
specs = [point.spec for point in points]
if hasattr(planner, "predict_grid"):
    predictions = planner.predict_grid(specs)
else:  # older trees; the oldest validate the specs again (no `specs` argument)
    scaling = planner.with_scaling_efficiency
    given = (specs,) if "specs" in inspect.signature(scaling).parameters else ()
    predictions = scaling([planner.predict(spec) for spec in specs], *given)
t3 = clock()
try:
    from reports.plan_json import plan_json
except ImportError:  # older trees print json.dumps(indent=2)
    plan_json = lambda objects: json.dumps(objects, indent=2)
text = plan_json(predictions)
t4 = clock()
assert len(predictions) == len(points)
try:
    from bench.config.groups import compose_groups
except ImportError:  # older trees compose in bench/config/compose.py
    compose_groups = config.compose_groups
print(json.dumps({
    "points": len(points),
    "composes": compose_groups.cache_info().misses,
    "import": [t1[0] - t0[0], t1[1] - t0[1]],
    "validate": [t2[0] - t1[0], t2[1] - t1[1]],
    "plan": [t3[0] - t2[0], t3[1] - t2[1]],
    "json": [t4[0] - t3[0], t4[1] - t3[1]],
}))
"""


def measure(overrides: list[str], tree: Path = ROOT) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(overrides), str(tree)], cwd=tree, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_command(form: list[str], tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one `fsdp-bench plan COMMAND_GRID [form]` in a fresh interpreter, run
    from `tree` (PYTHONPATH puts its bench/ first), stdout to /dev/null. A compact table's CSV goes
    to a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(tree), "TMPDIR": tmp}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "bench", "plan", *COMMAND_GRID, *form], cwd=tree, env=env, check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command_main(args: argparse.Namespace) -> int:
    """`--command`: both forms of the real command line, this tree and --tree interleaved."""
    trees = {"this tree": ROOT}
    if args.tree.resolve() != ROOT:
        trees["--tree"] = args.tree.resolve()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"fsdp-bench plan {' '.join(COMMAND_GRID)} [--json] > /dev/null, {args.repeats} runs each")
    print("| form | tree | median wall s | median CPU s | runs (wall s) |")
    print("|---|---|---:|---:|---|")
    medians: dict[tuple[str, str], float] = {}
    for form_name, form in COMMAND_FORMS.items():
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                runs[name].append(run_command(form, tree))
        for name, measured in runs.items():
            wall = statistics.median(w for w, _ in measured)
            cpu = statistics.median(c for _, c in measured)
            medians[form_name, name] = wall
            shown = ", ".join(f"{w:.2f}" for w, _ in measured)
            print(f"| {form_name} | {name} ({trees[name]}) | {wall:.2f} | {cpu:.2f} | {shown} |", flush=True)
        if "--tree" in trees:
            ratio = medians[form_name, "--tree"] / medians[form_name, "this tree"]
            print(f"| {form_name} | --tree / this tree | {ratio:.1f}x | | |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    worst = max(medians[form, "this tree"] for form in COMMAND_FORMS)
    ok = worst <= args.command_target
    print(f"this tree: slowest form {worst:.2f} s: {'within' if ok else 'over'} the {args.command_target:g} s target")
    return 0 if ok else 1


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
    parser.add_argument("--command-grid", action="store_true", help="also the 10,080-point grid --command times")
    parser.add_argument("--target", type=float, default=10.0, help="seconds the 10,000-point grid may take (wall)")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="time another checkout's bench/ with this interpreter (e.g. `git archive main | tar -x -C DIR`)",
    )
    parser.add_argument("--command", action="store_true", help="time the real `fsdp-bench plan` command line")
    parser.add_argument("--repeats", type=int, default=3, help="with --command: runs per form and tree (3)")
    parser.add_argument(
        "--command-target", type=float, default=10.0, help="with --command: seconds each form may take (median wall)"
    )
    args = parser.parse_args()
    if args.command:
        return command_main(args)

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print("| grid | points | Hydra composes | import s | validate s (wall / CPU) | plan s (wall / CPU) "
          "| validate + plan s (wall / CPU) | us per point (wall) | --json text s (wall / CPU) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    grids = [(f"{size:,}", BASE + SCALAR_AXES[size]) for size in args.sizes]
    grids += [("reference (1,260)", REFERENCE_GRID)] * args.reference_grid
    grids += [("--command grid (10,080)", COMMAND_GRID)] * args.command_grid
    for name, overrides in grids:
        r = measure(overrides, args.tree.resolve())
        total = [r["validate"][i] + r["plan"][i] for i in (0, 1)]
        per_point = 1e6 * total[0] / r["points"]
        print(
            f"| {name} | {r['points']:,} | {r['composes']} | {r['import'][0]:.2f} | "
            f"{r['validate'][0]:.2f} / {r['validate'][1]:.2f} | {r['plan'][0]:.2f} / {r['plan'][1]:.2f} | "
            f"{total[0]:.2f} / {total[1]:.2f} | {per_point:,.0f} | {r['json'][0]:.2f} / {r['json'][1]:.2f} |",
            flush=True,
        )
        if name[0].isdigit():
            rows.append((r["points"], total))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if len(rows) > 1:
        for label, index in (("wall", 0), ("CPU", 1)):
            fixed, slope = fit_line([p for p, _ in rows], [t[index] for _, t in rows])
            print(f"{label}: validate + plan = {fixed:.2f} s + {1e6 * slope:,.0f} us x points (least squares)")
    if not rows:
        return 0
    judged = next((row for row in rows if row[0] == TARGET_POINTS), max(rows, key=lambda row: row[0]))
    ok = judged[1][0] <= args.target
    print(
        f"{judged[0]:,} points in {judged[1][0]:.2f} s wall: {'within' if ok else 'over'} the {args.target:g} s target"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
