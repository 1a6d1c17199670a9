"""The numbers the pages' prose quotes: each flag's threshold, as the code that applies it reads it.

report.html.j2 and history.html.j2 write no threshold of their own (tests/unit/test_metrics.py greps
them): the flags' thresholds come from the metric catalogue (bench/schema/metrics.py), the interval's
level from the statistics engine, the contention margin from its rule, and the straggler rule from the
preflight settings the preflights ran with (and the defaults the points' step-time comparison uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.analysis.report.contention import SUPERLINEAR_MARGIN
from bench.analysis.stats import CONFIDENCE
from bench.schema.metrics import get
from bench.schema.options import PreflightSettings
from bench.schema.preflight import PreflightResult


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g}"


def flag_rules(preflights: Sequence[PreflightResult] = ()) -> dict[str, Any]:
    """The templates' `rules`: percentages as text (the template writes the % sign)."""
    efficiency, utilization = get("scaling_efficiency"), get("utilization")
    settings = [PreflightSettings(), *(p.settings for p in preflights if p.status == "ok")]
    stragglers = sorted({(s.straggler_k, s.straggler_floor) for s in settings})
    return {
        "linear_pct": _pct(1.0),  # an efficiency of 1: linear scaling
        "ci_pct": _pct(CONFIDENCE),
        "below_prediction_points": f"{efficiency.flag('below_prediction_points'):g}",
        "comm_bound_pct": _pct(efficiency.flag("comm_bound_share")),
        "contention_points": _pct(SUPERLINEAR_MARGIN),
        "throttled_pct": _pct(get("throttle_fraction").flag("throttled")),
        "idle_util_pct": f"{utilization.flag('idle_util_pct'):g}",
        "idle_share_pct": _pct(utilization.flag("idle_share")),
        "stragglers": [{"k": f"{k:g}", "floor_pct": _pct(floor)} for k, floor in stragglers],
    }
