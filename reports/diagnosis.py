"""Why a point scaled worse than the planner predicted: the flag and its likely cause.

One implementation for the report (HTML results table, summary.md) and for
`bench.planner.compare.efficiency_flag`. Pure functions on plain numbers: no pandas, no
planner import, so bench/ can import it cheaply.

The cause is a heuristic, not a measurement: the engine does not time communication
separately, so we ask where the *planner* puts the step's time. When the predicted
communication (exposed plus overlapped) is a large share of the predicted step, a shortfall
most likely comes from communication the model did not expect to be exposed (a slow or
misconfigured network: EFA/InfiniBand, NCCL settings); otherwise the step is compute-bound
and the shortfall most likely comes from slow kernels or a poor batch size. Check with a
profiler before acting on it.
"""

from __future__ import annotations

from typing import Any

# A measured scaling efficiency more than this many percentage points below the prediction
# earns a flag: beyond the run-to-run noise of a healthy cluster.
FLAG_POINTS = 10.0
# A point whose predicted communication (exposed plus overlapped) takes at least this share of
# the predicted step would lose efficiency first to the network; below it, to compute.
COMM_BOUND_SHARE = 0.2

COMM_CAUSE = "exposed communication: check the network (EFA/InfiniBand) and NCCL settings"
COMPUTE_CAUSE = "compute: check kernels, compile and the micro-batch size"


def is_below(measured: float | None, predicted: float | None) -> bool:
    """True when measured efficiency (a fraction) is more than FLAG_POINTS below the prediction."""
    if _missing(measured) or _missing(predicted):
        return False
    return 100 * (predicted - measured) > FLAG_POINTS


def likely_cause(step_time_s: float | None, comm_s: float | None) -> str | None:
    """COMM_CAUSE or COMPUTE_CAUSE from the predicted step time and communication seconds;
    None when the prediction lacks either (older records)."""
    if _missing(step_time_s) or _missing(comm_s) or step_time_s <= 0:
        return None
    return COMM_CAUSE if comm_s >= COMM_BOUND_SHARE * step_time_s else COMPUTE_CAUSE


def diagnose(
    measured: float | None, predicted: float | None, step_time_s: float | None, comm_s: float | None
) -> str | None:
    """The one-line flag for a point, or None when it is within FLAG_POINTS (or not comparable).

    `measured`/`predicted` are scaling efficiencies (fractions); `step_time_s` and `comm_s`
    the predicted step time and communication (exposed + overlapped) seconds.
    """
    if not is_below(measured, predicted):
        return None
    text = f"scaling efficiency {100 * (predicted - measured):.0f} points below prediction"
    cause = likely_cause(step_time_s, comm_s)
    return f"{text}; likely cause: {cause}" if cause else text


def predicted_comm_s(prediction: dict[str, Any]) -> float | None:
    """Exposed plus overlapped communication seconds from a planner prediction dict (None if absent)."""
    comm = prediction.get("comm_time_s") or {}
    parts = [comm.get("exposed"), comm.get("overlapped")]
    return None if any(_missing(p) for p in parts) else float(parts[0]) + float(parts[1])


def _missing(value: Any) -> bool:
    """None, NaN (pandas' missing number) or not a number."""
    return not isinstance(value, int | float) or isinstance(value, bool) or value != value
