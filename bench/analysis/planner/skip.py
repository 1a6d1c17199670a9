"""`sweep.plan=true`: a `skipped` record, carrying the prediction, for a point predicted not to fit.

With `sweep.plan=true` the sweep predicts every point (`plan_points`), records points that
do not fit as `skipped` (`skipped_record`: the reason in `error`, the point's plan object,
bench/analysis/planner/plan_object.py, in `prediction`) instead of launching them, and attaches
the plan object to every other record so reports show predicted next to measured.
"""

from __future__ import annotations

import datetime as dt

from bench.analysis.planner.plan_object import plan_object
from bench.analysis.planner.predict import predict, predict_grid
from bench.schema.record import RunResult, model_info, recipe_of
from bench.schema.spec import RunSpec
from bench.schema.units import GIB


def skip_reason(prediction: dict) -> str:
    """One line: how far over the device's memory the point is predicted to be."""
    need = prediction["memory_bytes_per_device"]["total"] / GIB
    have = prediction["device_memory_bytes"] / GIB
    largest = prediction["max_micro_batch"]
    hint = f"largest micro-batch that fits: {largest}" if largest else "no micro-batch fits"
    return f"planner: predicted not to fit ({need:.1f} GiB needed per device, {have:.1f} GiB available; {hint})"


def plan_points(specs: list[RunSpec]) -> dict[str, dict]:
    """point_id -> plan object for a sweep's points, scaling efficiency filled within each group."""
    return {plan["point_id"]: plan for plan in predict_grid(specs)}


def skipped_record(spec: RunSpec, prediction: dict) -> RunResult:
    """The `skipped` record of a point predicted not to fit, carrying the prediction."""
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return RunResult(
        point_id=spec.point_id,
        sweep=spec.sweep.name,
        status="skipped",
        error=skip_reason(prediction),
        started_at=now,
        finished_at=now,
        wall_s=0.0,
        spec=spec,
        recipe=recipe_of(spec),
        model_info=model_info(spec),
        prediction=prediction,
    )


def skip_if_not_fitting(spec: RunSpec) -> RunResult | None:
    """A skipped record for a point the planner predicts will run out of memory, else None."""
    prediction = plan_object(spec.point_id, predict(spec))
    return None if prediction["fits"] else skipped_record(spec, prediction)
