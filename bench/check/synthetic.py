"""Synthetic result records with controlled step times, for the check's tests and a dry demo of it.

Nothing here is a measurement: the numbers are drawn from a seeded normal distribution, and the
communication bytes are placeholders. Real records come from `fsdp-bench run`/`sweep`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.schemas import CommBytes, EnvInfo, Metrics, ModelInfo, RunResult, RunSpec, StepTimeStats
from fsdp_core.flops import flops_per_token

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
    spec: dict[str, Any] | None = None,
    status: str = "ok",
    comm: dict[str, int] | None = None,
    env: dict[str, Any] | None = None,
    mfu: float | None = None,
) -> RunResult:
    """A valid RunResult of a `debug` point whose timed steps took `times` seconds."""
    run_spec = RunSpec.model_validate({"model": "debug", "seq_len": 64, "micro_batch": 2, **(spec or {})})
    args = run_spec.model_args()
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
            flops_per_token=flops_per_token(args, run_spec.seq_len),
            tokens_per_step=tokens,
        )
    return RunResult(
        point_id=run_spec.point_id,
        sweep=run_spec.sweep,
        status=status,
        error=None if status == "ok" else f"synthetic {status}",
        spec=run_spec,
        model_info=ModelInfo(**args.info()),
        metrics=metrics,
        env=EnvInfo(**(env or SYNTHETIC_ENV)),
    )
