"""`sweep.plan=true`: a `skipped` record, carrying the prediction, for a point predicted not to fit.

The sweep calls `skip_if_not_fitting(spec)` for every pending point: None means launch it;
a RunResult (status "skipped", the reason in `error`, the planner's dict in `prediction`)
means record it instead of launching.
"""

from __future__ import annotations

import datetime as dt

from bench.planner.memory import GIB
from bench.planner.predict import predict
from bench.schemas import RunResult, RunSpec


def skip_reason(prediction: dict) -> str:
    """One line: how far over the device's memory the point is predicted to be."""
    need = prediction["memory_bytes_per_device"]["total"] / GIB
    have = prediction["device_memory_bytes"] / GIB
    largest = prediction["max_micro_batch"]
    hint = f"largest micro-batch that fits: {largest}" if largest else "no micro-batch fits"
    return f"planner: predicted not to fit ({need:.1f} GiB needed per device, {have:.1f} GiB available; {hint})"


def skip_if_not_fitting(spec: RunSpec) -> RunResult | None:
    """A skipped record for a point the planner predicts will run out of memory, else None."""
    prediction = predict(spec)
    if prediction["fits"]:
        return None
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return RunResult(
        point_id=spec.point_id,
        sweep=spec.sweep,
        status="skipped",
        error=skip_reason(prediction),
        started_at=now,
        finished_at=now,
        wall_s=0.0,
        spec=spec,
        model_info=spec.model_args().info(),
        prediction=prediction,
    )
