#!/usr/bin/env python
"""Predicted against measured job goodput under kills at explicit steps, at three checkpoint intervals.

Real 2-rank gloo runs of `debug` through the CLI (`debug.kill_steps`, `launcher.max_failures`,
`train.checkpoint=sync`), slowed with `debug.slow_fraction` so that steps, not the interpreter's
start-up, hold most of the wall. The costs the prediction uses are measured apart from the three
runs it predicts, in two calibration runs:

- `cal-plain` (no kill): the steady step time (productive_s / steps), the save cost (checkpoint_save_s
  / saves), the first attempt's start-up (startup_s) and the finalization;
- `cal-kill` (one kill, another interval and step count): the restore (restore_s) and the restart cost
  of one failure (its recovery_s and start-up beyond cal-plain's).

Those costs move with the load of a shared host between runs, so each run is also predicted from its
own costs, each measured apart from the goodput: the median timed step (`metrics.step_time_s`), the
median save (`metrics.checkpoint.saves`: blocked + bookkeeping), the restore per failure
(`metrics.job.restore_s`), and the start-up of every attempt with the recovery between them
(`metrics.job.startup_s` + `recovery_s`) and the finalization.

The prediction (bench/analysis/planner/failures.py `kill_schedule_goodput`) counts the saves and the
steps each kill undoes back to the last complete save from the kill schedule alone. Measured goodput
is each run's `metrics.job.job_goodput` (productive time over the wall, from its own clock).

    .venv/bin/python scripts/validate_goodput.py --out /tmp/goodput          # runs, then the table
    .venv/bin/python scripts/validate_goodput.py --out /tmp/goodput --no-run # the table from the records
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from bench.analysis.planner.failures import KillCosts, kill_schedule_goodput
from bench.schema.spec import TrainSpec

COMMON = ["model=debug", "gpus_per_node=2", "train.warmup_steps=2", "train.checkpoint=sync"]


def runs(steps: int, kills: list[int], intervals: list[int], slow: float) -> dict[str, list[str]]:
    """Each run's sweep name and its CLI arguments."""
    kill_list = "[" + ",".join(map(str, kills)) + "]"
    slowed = [f"debug.slow_fraction={slow}"]
    out = {
        "cal-plain": [f"train.steps={steps}", f"train.checkpoint_every={intervals[1]}", *slowed],
        "cal-kill": ["train.steps=20", "train.checkpoint_every=5", "debug.kill_steps=[12]", "launcher.max_failures=1"]
        + slowed,
    }
    for every in intervals:
        out[f"every{every}"] = [
            f"train.steps={steps}",
            f"train.checkpoint_every={every}",
            f"debug.kill_steps={kill_list}",
            f"launcher.max_failures={len(kills)}",
            *slowed,
        ]
    return out


def record(out: Path, name: str) -> dict:
    found = sorted(out.glob(f"{name}/*/result.json"))
    if len(found) != 1:
        sys.exit(f"{out / name}: expected one result.json, found {len(found)}")
    data = json.loads(found[0].read_text())
    if data["status"] != "ok":
        sys.exit(f"{found[0]}: status {data['status']}")
    return data


def train_of(rec: dict) -> TrainSpec:
    return TrainSpec.model_validate(rec["spec"]["train"])


def saves_of(rec: dict) -> int:
    train = train_of(rec)
    return sum(train.saves_after(step) for step in range(train.steps))


def costs(plain: dict, killed: dict) -> KillCosts:
    """The costs measured in the calibration runs (see the module docstring)."""
    pj, kj = plain["metrics"]["job"], killed["metrics"]["job"]
    failures = kj["attempts"] - 1
    restart = (kj["startup_s"] + kj["recovery_s"] - pj["startup_s"]) / failures
    return KillCosts(
        step_s=pj["productive_s"] / plain["spec"]["train"]["steps"],
        save_s=pj["checkpoint_save_s"] / saves_of(plain),
        startup_s=pj["startup_s"],
        restore_s=kj["restore_s"] / failures,
        restart_s=restart,
        finalization_s=pj["finalization_s"],
    )


def own_costs(rec: dict) -> KillCosts:
    """One run's own costs (see the module docstring): start-ups and recoveries folded into startup_s."""
    job, metrics = rec["metrics"]["job"], rec["metrics"]
    saves = sorted(save["blocked_s"] + save["bookkeeping_s"] for save in metrics["checkpoint"]["saves"])
    failures = job["attempts"] - 1
    return KillCosts(
        step_s=metrics["step_time_s"]["median"],
        save_s=saves[len(saves) // 2],
        startup_s=job["startup_s"] + job["recovery_s"],
        restore_s=job["restore_s"] / failures if failures else 0.0,
        restart_s=0.0,
        finalization_s=job["finalization_s"],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results_dir of the runs")
    parser.add_argument("--no-run", action="store_true", help="only read the records already in --out")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--kills", default="19,38", help="kill steps, comma-separated")
    parser.add_argument("--intervals", default="4,10,20", help="three checkpoint_every values")
    parser.add_argument("--slow", type=float, default=9.0, help="debug.slow_fraction")
    args = parser.parse_args()
    kills = [int(k) for k in args.kills.split(",")]
    intervals = [int(k) for k in args.intervals.split(",")]
    plan = runs(args.steps, kills, intervals, args.slow)
    if not args.no_run:
        for name, extra in plan.items():
            cmd = [sys.executable, "-m", "bench.cli.main", "run", *COMMON, *extra]
            cmd += [f"results_dir={args.out}", f"sweep.name={name}"]
            print("$", " ".join(cmd[1:]), flush=True)
            subprocess.run(cmd, check=True)
    measured = costs(record(args.out, "cal-plain"), record(args.out, "cal-kill"))
    print("costs measured apart (s): " + ", ".join(f"{name} {value:.3f}" for name, value in asdict(measured).items()))
    print(
        f"{'checkpoint_every':>16} {'saves':>5} {'redone':>9} {'wall_s':>6} {'measured':>8} "
        f"{'own costs':>9} {'diff pp':>7} {'apart':>6} {'diff pp':>7}"
    )
    worst = 0.0
    for every in intervals:
        rec = record(args.out, f"every{every}")
        job = rec["metrics"]["job"]
        own = kill_schedule_goodput(train_of(rec), kills, own_costs(rec))
        apart = kill_schedule_goodput(train_of(rec), kills, measured)
        diff_own = 100 * (own["goodput"] - job["job_goodput"])
        diff_apart = 100 * (apart["goodput"] - job["job_goodput"])
        worst = max(worst, abs(diff_own))
        redone = f"{own['steps_redone']}/{job['steps_redone']}"
        print(
            f"{every:>16} {own['saves']:>5} {redone:>9} {job['wall_s']:>6.1f} {job['job_goodput']:>8.3f} "
            f"{own['goodput']:>9.3f} {diff_own:>+7.1f} {apart['goodput']:>6.3f} {diff_apart:>+7.1f}"
        )
    print("redone: predicted/measured; own costs: each run's costs measured apart from its goodput; apart: the")
    print(f"calibration runs' costs. Largest difference with own costs: {worst:.1f} percentage points (target 5)")
    return 0 if worst <= 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
