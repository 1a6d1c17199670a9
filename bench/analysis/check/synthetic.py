"""Synthetic result records with controlled step times, for the check's tests and a dry demo of it.

Nothing here is a measurement: the numbers are drawn from a seeded normal distribution, and the
communication bytes are placeholders. Real records come from `fsdp-bench run`/`sweep`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.schema.env import EnvInfo
from bench.schema.flops import flops_per_token
from bench.schema.record import CommBytes, Metrics, RunResult, StepTimeStats, model_info, recipe_of
from bench.schema.spec import RunSpec

# Placeholder communication volume of one step, bytes (a real debug point's value differs).
_COMM = {"all_gather": 1_000_000, "reduce_scatter": 500_000, "all_reduce": 0}
SYNTHETIC_ENV = {"torch": "2.0.0+synthetic", "device_name": "synthetic-cpu", "platform": "synthetic"}


def step_times(median_s: float, cv: float, n: int, seed: int) -> list[float]:
    """`n` positive step times around `median_s` with relative spread `cv` (seeded)."""
    rng = np.random.default_rng(seed)
    return [max(float(t), median_s * 0.01) for t in rng.normal(median_s, median_s * cv, n)]


def make_record(
    times: list[float],
    *,
    spec: dict[str, Any] | RunSpec | None = None,
    status: str = "ok",
    comm: dict[str, int] | None = None,
    env: dict[str, Any] | None = None,
    mfu: float | None = None,
) -> RunResult:
    """A valid RunResult of a `debug` point whose timed steps took `times` seconds (`spec`: a RunSpec,
    or fields as bench.config.compose.spec_from_fields takes them)."""
    from bench.config.compose import spec_from_fields

    if isinstance(spec, RunSpec):
        run_spec = spec
    else:
        run_spec = spec_from_fields(**{"model": "debug", "seq_len": 64, "micro_batch": 2, **(spec or {})})
    tokens = run_spec.tokens_per_step
    metrics = Metrics()
    if status == "ok":
        arr = np.asarray(times)
        median = float(np.median(arr))
        metrics = Metrics(
            tokens_per_s=tokens / median,
            step_times_s=list(times),
            step_time_s=StepTimeStats(
                median=median,
                mean=float(arr.mean()),
                p10=float(np.percentile(arr, 10)),
                p90=float(np.percentile(arr, 90)),
                cv=float(arr.std() / arr.mean()),
            ),
            mfu=mfu,
            comm_bytes_per_step=CommBytes(**(comm or _COMM)),
            flops_per_token=flops_per_token(run_spec.model, run_spec.train.seq_len),
            tokens_per_step=tokens,
        )
    return RunResult(
        point_id=run_spec.point_id,
        sweep=run_spec.sweep.name,
        status=status,
        error=None if status == "ok" else f"synthetic {status}",
        spec=run_spec,
        recipe=recipe_of(run_spec),
        model_info=model_info(run_spec),
        metrics=metrics,
        env=EnvInfo(**(env or SYNTHETIC_ENV)),
    )
