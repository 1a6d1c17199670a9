"""When a scaling efficiency says more about the machine than about scaling: the one rule that
flags it, read by the console's sweep table, the report's tables and summary.md (through the
`contention` column bench/analysis/report/aggregate.py computes with it).

A point's efficiency is suspect when
- it is above 100 % by more than noise explains: by more than SUPERLINEAR_MARGIN, or with a 95 %
  interval (repeats) whose low end is above 100 %. Per-device work is fixed in weak scaling and
  only shrinks in strong scaling, so an efficiency far beyond linear says the baseline ran slow,
  not that the nodes sped each other up (a sweep on a loaded 2-core host printed 1,290 %);
- the point, or the baseline it is divided by, was measured on a loaded host (`metrics.host_load`,
  `HostLoad.loaded`: a load average beyond the cores the point's ranks used) or on a shared one
  (`env.exclusive_host` false: the host lock was skipped, `sweep.allow_concurrent=true`).

Pure functions on plain values: no pandas, so the console can read the rule cheaply.
"""

from __future__ import annotations

import math

from bench.analysis.stats import CONFIDENCE_PCT

# Efficiency above 100 % by more than this (a fraction: 0.15 = 15 points) is beyond what run-to-run
# noise gives one run a side: on the shared 2-core VM two clean sweeps of one point 20 s apart
# differed by -12.9 % to +12.8 % (standard deviation 7.6 %, docs/results/checks.md); 15 points is
# about two of those deviations. With repeats the interval speaks instead.
SUPERLINEAR_MARGIN = 0.15
CONTENTION = "contention"


def suspect_efficiency(
    efficiency: float | None,
    ci_low: float | None = None,
    *,
    loaded_host: str | None = None,
    shared: bool = False,
    baseline_loaded_host: str | None = None,
    baseline_shared: bool = False,
) -> str | None:
    """Whether and why a point's scaling efficiency is suspect: one line, "contention: <reasons>",
    or None when it is not (or the point has no efficiency).

    `ci_low`: the low end of the efficiency's 95 % interval (None or NaN without repeats);
    `loaded_host`: the hosts that were loaded while the point ran (None: none); `shared`: the point
    ran without the host lock; the `baseline_` pair is the same of the baseline cell its
    efficiency is divided by (left unset for a point at the baseline's own node count).
    """
    if _missing(efficiency):
        return None
    reasons = []
    if efficiency > 1.0 + SUPERLINEAR_MARGIN:
        reasons.append(
            f"efficiency {efficiency * 100:,.0f} % is more than {SUPERLINEAR_MARGIN * 100:.0f} points above 100 %"
        )
    elif not _missing(ci_low) and ci_low > 1.0:
        reasons.append(
            f"efficiency {efficiency * 100:,.0f} % with its {CONFIDENCE_PCT} % interval above 100 % (from {ci_low * 100:.1f} %)"
        )
    if loaded_host:
        reasons.append(f"measured on a loaded host ({loaded_host})")
    if shared:
        reasons.append("measured without the host lock (a shared host)")
    if baseline_loaded_host:
        reasons.append(f"its baseline was measured on a loaded host ({baseline_loaded_host})")
    if baseline_shared:
        reasons.append("its baseline was measured without the host lock")
    return f"{CONTENTION}: " + "; ".join(reasons) if reasons else None


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)
