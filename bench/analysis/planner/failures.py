"""Failures and cost in a plan: the job's MTBF, the checkpoint interval that maximizes goodput, the
goodput and wall time at it, and dollars per token where the cluster has a price.

Failures are independent, so N nodes of MTBF M fail every M / N (`job_mtbf_s`). The save cost δ is
the planner's blocked time per save (bench/analysis/planner/checkpoint.py; a point without saves is
planned with sync saves), the restart cost R its restore (`read_s`) plus `cluster.restart_s`.

- Young's first-order optimum of the compute time between saves: τ = sqrt(2 δ M).
- Daly's higher-order optimum (J. T. Daly, "A higher order estimate of the optimum checkpoint
  interval for restart dumps", Future Generation Computer Systems 22, 2006):
  τ = sqrt(2 δ M) [1 + sqrt(δ / 2M) / 3 + (δ / 2M) / 9] - δ for δ < 2M, else M;
  and the expected wall time of a job of compute time T: M e^(R/M) (e^((τ + δ)/M) - 1) T / τ,
  whose ratio T / wall is the goodput.

Kills at given steps (`debug.kill_steps`) are not a rate: `kill_schedule_goodput` replays the schedule
step by step. Each attempt runs from its resume point to its kill, saving where the point saves; the
next resumes after the last save that attempt completed (or where it began, without one). The wall is
the first start-up, every step once plus the redone ones, every save, a restart and a restore per
kill, and the finalization; the goodput is the steps' own time over it, as `metrics.job.job_goodput`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

HOUR_S = 3600.0


def job_mtbf_s(node_mtbf_h: float, nodes: int) -> float:
    return node_mtbf_h * HOUR_S / nodes


def young_interval_s(save_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * save_s * mtbf_s)


def daly_interval_s(save_s: float, mtbf_s: float) -> float:
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - save_s


def daly_goodput(interval_s: float, save_s: float, restart_s: float, mtbf_s: float) -> float:
    """Compute time / expected wall time with saves every `interval_s` of compute (Daly's model)."""
    wall_per_compute = mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((interval_s + save_s) / mtbf_s) / interval_s
    return 1.0 / wall_per_compute


def plan_failures(
    step_time_s: float, save_s: float, read_s: float, restart_s: float | None, node_mtbf_h: float, nodes: int
) -> dict[str, Any]:
    """The plan's `failures` section (see the module docstring); intervals in seconds and whole steps."""
    mtbf = job_mtbf_s(node_mtbf_h, nodes)
    restart = read_s + (restart_s or 0.0)
    young = young_interval_s(save_s, mtbf)
    daly = daly_interval_s(save_s, mtbf)
    every = max(1, round(daly / step_time_s)) if step_time_s > 0 else 1
    interval = every * step_time_s
    return {
        "node_mtbf_h": node_mtbf_h,
        "job_mtbf_h": mtbf / HOUR_S,
        "save_s": save_s,
        "restart_s": restart,
        "restart_counts_startup": restart_s is not None,
        "young_interval_s": young,
        "interval_s": interval,
        "checkpoint_every": every,
        "goodput": daly_goodput(interval, save_s, restart, mtbf) if interval > 0 else None,
    }


def measured_restart_s(jobs: list[Any]) -> float | None:
    """`cluster.restart_s` measured: the median over records with restarts (`metrics.job`) of one
    restart's cost beside its restore, None without such a record.

    A record sums its attempts: a restart costs its recovery, its process start (the program start-up
    beyond the launch's, which the first attempt holds) and, counted as equal per attempt, its
    initialization and first steps' excess. A record whose program start-up is below the launch's (a
    grouped launch's later point: its first attempt did not start the launch) is ambiguous and skipped."""
    costs = []
    for job in jobs:
        failures = job.attempts - 1
        launch = job.launch_startup_s or 0.0
        if failures < 1 or job.program_startup_s < launch:
            continue
        per_attempt = (job.initialization_s + job.step_startup_s) / job.attempts
        costs.append((job.recovery_s + job.program_startup_s - launch) / failures + per_attempt)
    if not costs:
        return None
    costs.sort()
    middle = len(costs) // 2
    return costs[middle] if len(costs) % 2 else (costs[middle - 1] + costs[middle]) / 2


def to_train(tokens: float, plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's `to_train` section: hours (and dollars, with a price) to train `tokens` at the planned
    throughput, at the best checkpoint interval's goodput where failures are modelled."""
    failures, cost = plan.get("failures"), plan.get("cost")
    goodput = (failures or {}).get("goodput") or 1.0
    rate = (plan.get("tokens_per_s") or 0.0) * goodput
    hours = tokens / rate / HOUR_S if rate > 0 else None
    nodes = plan["spec"]["nodes"]
    usd = hours * cost["usd_per_node_hour"] * nodes if hours is not None and cost else None
    return {"tokens": tokens, "goodput": goodput, "hours": hours, "days": hours / 24 if hours else None, "usd": usd}


def usd_per_mtoken(usd_per_node_hour: float | None, nodes: int, tokens_per_s: float | None, goodput: float = 1.0):
    """Dollars per million trained tokens: what the nodes cost per second over the tokens that survive."""
    if not usd_per_node_hour or not tokens_per_s or not goodput:
        return None
    return usd_per_node_hour * nodes / HOUR_S / (tokens_per_s * goodput) * 1e6


@dataclass(frozen=True, kw_only=True)
class KillCosts:
    """Measured costs of a point's parts, in seconds: one steady step, one save, the first attempt's
    start-up, one restore, one restart (from the kill to the new attempt's first steady step, restore
    apart) and the finalization after the last step."""

    step_s: float
    save_s: float
    startup_s: float
    restore_s: float
    restart_s: float
    finalization_s: float


class SaveSchedule(Protocol):
    """What of a point's training decides when it saves (bench.schema.spec.TrainSpec)."""

    steps: int

    def saves_after(self, step: int) -> bool: ...


def kill_schedule_goodput(train: SaveSchedule, kill_steps: list[int], costs: KillCosts) -> dict[str, Any]:
    """Predicted wall and job goodput of a point killed at the start of each of `kill_steps`, one kill
    per attempt (see the module docstring): also the saves made, the steps redone and the attempts."""
    start = saves = redone = 0
    for kill in kill_steps:
        saved = [step for step in range(start, kill) if train.saves_after(step)]
        saves += len(saved)
        resume = saved[-1] + 1 if saved else start
        redone += kill - resume
        start = resume
    saves += sum(train.saves_after(step) for step in range(start, train.steps))
    productive = train.steps * costs.step_s
    wall = (
        costs.startup_s
        + productive
        + redone * costs.step_s
        + saves * costs.save_s
        + len(kill_steps) * (costs.restart_s + costs.restore_s)
        + costs.finalization_s
    )
    return {
        "attempts": len(kill_steps) + 1,
        "saves": saves,
        "steps_redone": redone,
        "productive_s": productive,
        "wall_s": wall,
        "goodput": productive / wall if wall > 0 else None,
    }
