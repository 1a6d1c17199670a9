"""Why a point scaled worse than the planner predicted: the flag and its likely cause.

One implementation for the report (HTML results table, summary.md) and for
`bench.analysis.plan_accuracy.efficiency_flag`. Pure functions on plain numbers: no pandas, no
planner import, so bench/ can import it cheaply.

Where the point was profiled (profile.enabled: metrics.step_breakdown), the cause is measured:
its exposed communication's share of the profiled step against the threshold. Elsewhere it is a
heuristic: we ask where the *planner* puts the step's time. When the predicted communication
(exposed plus overlapped) is a large share of the predicted step, a shortfall most likely comes
from communication the model did not expect to be exposed (a slow or misconfigured network:
EFA/InfiniBand, NCCL settings); otherwise the step is compute-bound and the shortfall most likely
comes from slow kernels or a poor batch size. The text says which of the two it used.
"""

from __future__ import annotations

from typing import Any

from bench.schema.metrics import get

# The thresholds are scaling efficiency's flags in the metric catalogue (bench/schema/metrics.py):
# a measured efficiency more than FLAG_POINTS percentage points below the prediction earns a flag
# (beyond the run-to-run noise of a healthy cluster); a point whose predicted communication (exposed
# plus overlapped) takes at least COMM_BOUND_SHARE of the predicted step would lose efficiency first
# to the network, below it to compute.
FLAG_POINTS = get("scaling_efficiency").flag("below_prediction_points")
COMM_BOUND_SHARE = get("scaling_efficiency").flag("comm_bound_share")

COMM_CAUSE = "exposed communication: check the network (EFA/InfiniBand) and NCCL settings"
COMPUTE_CAUSE = "compute: check kernels, compile and the micro-batch size"


def is_below(measured: float | None, predicted: float | None) -> bool:
    """True when measured efficiency (a fraction) is more than FLAG_POINTS below the prediction."""
    if _missing(measured) or _missing(predicted):
        return False
    return 100 * (predicted - measured) > FLAG_POINTS


def likely_cause(step_time_s: float | None, comm_s: float | None, measured_share: float | None = None) -> str | None:
    """COMM_CAUSE or COMPUTE_CAUSE, followed by what it was judged from: the measured exposed
    communication's share of the profiled step where there is one, else the predicted step time and
    communication seconds; None when neither is known (older records)."""
    if not _missing(measured_share):
        cause = COMM_CAUSE if measured_share >= COMM_BOUND_SHARE else COMPUTE_CAUSE
        return f"{cause} (measured: exposed communication {100 * measured_share:.0f} % of the profiled step)"
    if _missing(step_time_s) or _missing(comm_s) or step_time_s <= 0:
        return None
    cause = COMM_CAUSE if comm_s >= COMM_BOUND_SHARE * step_time_s else COMPUTE_CAUSE
    return f"{cause} (predicted: communication {100 * comm_s / step_time_s:.0f} % of the planner's step)"


def diagnose(
    measured: float | None,
    predicted: float | None,
    step_time_s: float | None,
    comm_s: float | None,
    evidence: str | None = None,
    measured_share: float | None = None,
) -> str | None:
    """The one-line flag for a point, or None when it is within FLAG_POINTS (or not comparable).

    `measured`/`predicted` are scaling efficiencies (fractions); `step_time_s` and `comm_s`
    the predicted step time and communication (exposed + overlapped) seconds; `evidence` what the
    point's preflight measured (measured_evidence), cited after the cause; `measured_share` the
    profiled steps' exposed communication share, which decides the cause where there is one.
    """
    if not is_below(measured, predicted):
        return None
    text = f"scaling efficiency {100 * (predicted - measured):.0f} points below prediction"
    cause = likely_cause(step_time_s, comm_s, measured_share)
    text = f"{text}; likely cause: {cause}" if cause else text
    return f"{text}; measured: {evidence}" if evidence else text


def measured_evidence(
    *,
    nodes: int,
    link_gbps: float | None,
    nominal_link_gbps: float | None,
    matmul_tflops: float | None,
    peak_tflops: float | None,
    exposed_s: float | None,
    step_time_s: float | None,
    stragglers: str | None,
) -> str | None:
    """What the preflight of a point's world shape measured, in the words a flag cites: the link the
    point's communication crosses (the network across nodes, NVLink within one) against the preset,
    matmul throughput against the device's peak, stragglers, and the predicted exposed share."""
    where = "inter-node" if nodes > 1 else "intra-node"
    parts = []
    if not _missing(link_gbps) and not _missing(nominal_link_gbps):
        parts.append(f"{where} bandwidth {link_gbps:,.4g} Gbit/s measured vs {nominal_link_gbps:,.4g} nominal")
    if not _missing(matmul_tflops):
        peak = f" vs {peak_tflops:,.4g} peak" if not _missing(peak_tflops) else ""
        parts.append(f"matmul {matmul_tflops:,.3g} TFLOP/s{peak}")
    if stragglers:
        parts.append(f"stragglers: {stragglers}")
    if not parts:
        return None
    if not _missing(exposed_s) and not _missing(step_time_s) and step_time_s > 0:
        parts.append(f"exposed communication {100 * exposed_s / step_time_s:.0f} % of the predicted step")
    return ", ".join(parts)


def predicted_comm_s(prediction: dict[str, Any]) -> float | None:
    """Exposed plus overlapped communication seconds from a planner prediction dict (None if absent)."""
    comm = prediction.get("comm_time_s") or {}
    parts = [comm.get("exposed"), comm.get("overlapped")]
    return None if any(_missing(p) for p in parts) else float(parts[0]) + float(parts[1])


def _missing(value: Any) -> bool:
    """None, NaN (pandas' missing number) or not a number."""
    return not isinstance(value, int | float) or isinstance(value, bool) or value != value
