"""Compare current points with baseline points: one Finding per (point, metric).

Counters are compared exactly (floats within a relative 1e-9): any change is reported, a
worsening beyond its threshold (0% by default) fails. Timings are compared on per-step samples:
a regression is declared only when the median drops beyond the threshold AND the drop is
significant (one-sided Mann-Whitney U p < alpha and the bootstrap CI of the median ratio
excludes 1). A timing with fewer than `min_runs` runs on either side is `insufficient` and never
gates: per-step samples of one run cannot show run-to-run noise (two back-to-back cpu_smoke sweeps
of 1 run each gave a false alarm 4 times in 20). A point that ran ok in the baseline but not now
fails on its status. The numerics guard (bench/analysis/check/numerics.py) compares every run's loss curve
with the baseline's: a curve that diverged or a non-finite loss fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench.analysis.check.numerics import LOSS_RTOL, compare_curves, exact_rule
from bench.analysis.check.points import PointData
from bench.analysis.check.power import detectable_change
from bench.analysis.check.thresholds import COUNTERS, METRICS, TIMINGS, Threshold, Thresholds
from bench.analysis.check.timings import (
    TimingComparison,
    compare_samples,
    compare_timing_metric,
    has_timing,
    samples_kind,
    timing_runs,
)
from bench.analysis.stats import CONFIDENCE_PCT, MIN_RUNS, Comparison

# Floats such as flops_per_token are products of integers: a relative 1e-9 absorbs rounding
# in the JSON round trip and nothing else.
FLOAT_RTOL = 1e-9
ALPHA = 0.05
# Fewer samples per side than this cannot make a one-sided U test significant at 5%.
MIN_SAMPLES = 3
# Runs per side (repeats of a point) below which a timing comparison does not gate (bench.analysis.stats:
# one run's per-step samples miss run-to-run spread, so two quiet runs of the same code "differ").
RUNS_HINT = "1 run per side: per-step samples miss run-to-run noise; use sweep.repeats>=2 or fsdp-bench ab"

# A timing whose noise hides a change of its threshold's size (check), or a series whose noise hides
# the target shift (history): the gate could not have caught it. Fails only where asked to (gating).
NOT_GATED = "not gated"
# Verdicts that fail the check when the finding is gating (diverged, non-finite: the numerics guard).
FAILING = {"regression", "missing", "diverged", "non-finite", NOT_GATED}
NO_CURVE_HINT = "no baseline curve (the baseline keeps no loss curves: saved by an older fsdp-bench; save it again)"
# Statuses of points that did not run (the planner skipped them, or the sweep was interrupted):
# listed as "not in current results", not failed; failed, timeout and oom points fail.
NOT_RUN = {"skipped", "interrupted"}


@dataclass(frozen=True)
class Finding:
    """One row of the check's table."""

    point: str
    metric: str
    kind: str  # "counter", "timing" or "status"
    baseline: float | str | None
    current: float | str | None
    change: float | None  # current / baseline - 1
    verdict: str  # ok, regression, improved, changed, noise, missing, new, insufficient
    confidence: str = ""
    gating: bool = True
    hint: str = ""  # why the finding could not be judged (shown once under the table, and in JUnit)

    @property
    def fails(self) -> bool:
        return self.gating and self.verdict in FAILING


@dataclass
class CheckReport:
    """All findings plus the points that only one side has."""

    findings: list[Finding] = field(default_factory=list)
    only_in_baseline: list[str] = field(default_factory=list)
    only_in_current: list[str] = field(default_factory=list)
    matched: int = 0
    env_lines: list[str] = field(default_factory=list)
    thresholds: str = ""

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.fails]

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression, 2 nothing comparable (docs/checks.md)."""
        if not self.matched:
            return 2
        return 1 if self.regressions else 0

    @property
    def hints(self) -> list[str]:
        """Distinct hints of the findings, in first-seen order (printed once each)."""
        return list(dict.fromkeys(f.hint for f in self.findings if f.hint))

    @property
    def verdict_hints(self) -> list[tuple[str, str]]:
        """Distinct (verdict, hint) pairs, in first-seen order: what each hint explains."""
        return list(dict.fromkeys((f.verdict, f.hint) for f in self.findings if f.hint))


def compare(
    baseline: list[PointData],
    current: list[PointData],
    thresholds: Thresholds | None = None,
    *,
    gate_timings: bool = True,
    alpha: float = ALPHA,
    min_runs: int = MIN_RUNS,
    numerics: bool = True,
    loss_rtol: float = LOSS_RTOL,
) -> CheckReport:
    """Match points by identity and compare every counter and timing (and loss curve) of each matched
    pair."""
    thresholds = thresholds or Thresholds()
    base_by_key = {p.key: p for p in baseline}
    report = CheckReport(thresholds=thresholds.describe())
    ran = {p.key for p in current if p.status not in NOT_RUN}
    report.only_in_baseline = [p.label for p in baseline if p.key not in ran]
    pairs = []
    for point in sorted(current, key=lambda p: p.label):
        base = base_by_key.get(point.key)
        if point.status in NOT_RUN:
            continue
        if base is None or base.status != "ok":
            report.only_in_current.append(point.label)
            continue
        pairs.append((base, point))
    report.matched = len(pairs)
    for (base, point), samples in zip(pairs, timing_comparisons(pairs), strict=True):
        report.findings.extend(
            compare_point(
                base, point, thresholds, gate_timings=gate_timings, alpha=alpha, min_runs=min_runs, samples=samples
            )
        )
        if numerics and point.status == "ok":
            report.findings.extend(filter(None, [compare_numerics(point.label, base, point, loss_rtol)]))
    return report


def timing_comparisons(pairs: Sequence[tuple[PointData, PointData]]) -> list[dict[str, Comparison]]:
    """The comparisons every matched (baseline, current) pair's timings need, by samples_kind, all
    computed together (a 10,000-record check compares thousands of points): the step times once
    per pair for step time, tokens/s and MFU, each run-level metric's values once."""
    wanted = []
    for position, (base, cur) in enumerate(pairs):
        if cur.status != "ok":
            continue
        kinds = {samples_kind(name): name for name in TIMINGS if comparable(base, cur, name)}
        wanted += [(position, kind, metric) for kind, metric in kinds.items()]
    results = compare_samples([(*pairs[position], metric) for position, _, metric in wanted])
    out: list[dict[str, Comparison]] = [{} for _ in pairs]
    for (position, kind, _), result in zip(wanted, results, strict=True):
        out[position][kind] = result
    return out


def comparable(base: PointData, cur: PointData, metric: str) -> bool:
    """Both sides have the timing and enough samples of it for compare_timing to compare them."""
    if not has_timing(base, metric) or not has_timing(cur, metric):
        return False
    return min(sum(map(len, timing_runs(point, metric))) for point in (base, cur)) >= MIN_SAMPLES


def compare_point(
    base: PointData,
    cur: PointData,
    thresholds: Thresholds,
    *,
    gate_timings: bool,
    alpha: float,
    min_runs: int = MIN_RUNS,
    samples: Mapping[str, Comparison] | None = None,
) -> list[Finding]:
    """Findings for one matched pair; a current point that is no longer ok fails on its status.
    `samples`: the pair's timing_comparisons, where the caller computed them for many pairs."""
    if cur.status != "ok":
        return [Finding(cur.label, "status", "status", base.status, cur.status, None, "regression")]
    findings = [compare_counter(cur.label, base, cur, thresholds[name]) for name in COUNTERS]
    findings += [
        compare_timing(
            cur.label,
            base,
            cur,
            thresholds[name],
            alpha=alpha,
            gating=gate_timings,
            min_runs=min_runs,
            samples=(samples or {}).get(samples_kind(name)),
        )  # fmt: skip
        for name in TIMINGS
    ]
    return [f for f in findings if f is not None]


def compare_numerics(label: str, base: PointData, cur: PointData, rtol: float = LOSS_RTOL) -> Finding | None:
    """Every current run's loss curve against the baseline's first; the first failing run decides
    (None when the current point kept no curve)."""
    if not cur.loss_runs:
        return None
    device_type = cur.identity.get("cluster", {}).get("device_type", "")
    exact = exact_rule(base.fingerprint, cur.fingerprint, device_type, base.hosts, cur.hosts)
    reference = base.loss_runs[0] if base.loss_runs else None
    verdicts = [compare_curves(reference, curve, exact=exact, rtol=rtol) for curve in cur.loss_runs]
    verdict = next((v for v in verdicts if v.fails), verdicts[0])
    if verdict.verdict == "no baseline curve":
        return Finding(label, "loss_curve", "numerics", None, None, None, verdict.verdict, hint=NO_CURVE_HINT)
    run = f"run {verdicts.index(verdict) + 1}/{len(verdicts)}: " if verdict.fails and len(verdicts) > 1 else ""
    return Finding(
        label, "loss_curve", "numerics", verdict.baseline, verdict.current, None, verdict.verdict,
        run + verdict.describe(),
    )  # fmt: skip


def compare_counter(label: str, base: PointData, cur: PointData, threshold: Threshold) -> Finding | None:
    """Exact comparison of one deterministic counter (None when neither side measured it)."""
    name = threshold.metric
    before, after = base.counters.get(name), cur.counters.get(name)
    if before is None and after is None:
        return None
    if before is None or after is None:
        verdict = "new" if before is None else "missing"
        return Finding(label, name, "counter", before, after, None, verdict)
    change = after / before - 1.0 if before else None
    if abs(after - before) <= FLOAT_RTOL * max(abs(before), abs(after)):
        verdict = "ok"
    elif threshold.is_exceeded(before, after):
        verdict = "regression"
    else:
        verdict = "improved" if threshold.worsening_pct(before, after) < 0 else "changed"
    return Finding(label, name, "counter", before, after, change, verdict, "exact")


def compare_timing(
    label: str,
    base: PointData,
    cur: PointData,
    threshold: Threshold,
    *,
    alpha: float,
    gating: bool,
    min_runs: int = MIN_RUNS,
    samples: Comparison | None = None,
) -> Finding | None:
    """Noise-aware comparison of one timing's per-step samples (None when neither side has any).

    With fewer than `min_runs` runs on a side the numbers are still shown, but the verdict is a
    non-gating `insufficient` with a hint. `samples`: the comparison of its samples, precomputed.
    """
    name = threshold.metric
    before, after = has_timing(base, name), has_timing(cur, name)
    if not before and not after:
        return None
    if not before or not after:
        return Finding(label, name, "timing", None, None, None, "new" if not before else "missing", gating=False)
    base_runs, cur_runs = timing_runs(base, name), timing_runs(cur, name)
    n_before, n_after = sum(map(len, base_runs)), sum(map(len, cur_runs))
    if min(n_before, n_after) < MIN_SAMPLES:
        note = f"n={n_before}/{n_after} < {MIN_SAMPLES}"
        return Finding(label, name, "timing", None, None, None, "insufficient", note, gating=False)
    result = compare_timing_metric(base, cur, name, samples)
    verdict, p = timing_verdict(result, threshold, alpha)
    confidence = f"p={p:.2g} CI[{result.ci_low:.3f},{result.ci_high:.3f}] n={n_before}/{n_after}"
    runs_before, runs_after = len(base_runs), len(cur_runs)
    hint = runs_hint(runs_before, runs_after, min_runs)
    if hint:
        verdict, gating = "insufficient", False
        confidence = f"runs={runs_before}/{runs_after} < {min_runs}; {confidence}"
    else:
        verdict, gating, hint, confidence = _power(verdict, gating, threshold, base_runs, cur_runs, alpha, confidence)
    return Finding(
        label,
        name,
        "timing",
        result.baseline,
        result.current,
        result.ratio - 1.0,
        verdict,
        confidence,
        gating,
        hint,
    )


def _power(
    verdict: str, gating: bool, threshold: Threshold, base_runs: list, cur_runs: list, alpha: float, confidence: str
) -> tuple[str, bool, str, str]:
    """The smallest change these runs detect (bench/analysis/check/power.py) added to the confidence;
    a pass (`ok`, `noise`) whose runs could not have detected a change of the threshold's size is
    `not gated`, with the hint to add repeats."""
    higher = METRICS[threshold.metric].better == "higher"
    detectable = detectable_change(base_runs, cur_runs, alpha, higher, threshold.pct / 100)
    if detectable is None:
        return verdict, gating, "", confidence
    confidence = f"{confidence} detects>={detectable * 100:.1f}%"
    # Gated where the noise alone (no threshold) would let a change of the threshold's size through.
    noise_only = detectable_change(base_runs, cur_runs, alpha, higher)
    if verdict not in ("ok", "noise") or noise_only * 100 <= threshold.pct:
        return verdict, gating, "", confidence
    hint = (
        f"{threshold.metric}: the runs' noise hides a change of {threshold.pct:g}% (95% detects >= "
        f"{detectable * 100:.1f}%); more repeats per side, or a quieter machine"
    )
    return NOT_GATED, False, hint, confidence


def runs_hint(runs_before: int, runs_after: int, min_runs: int) -> str:
    """Why a timing cannot gate with this many runs per side ("" when it can)."""
    if min(runs_before, runs_after) >= min_runs:
        return ""
    if max(runs_before, runs_after) == 1:
        return RUNS_HINT
    return f"fewer than {min_runs} runs on a side: " + RUNS_HINT.split(": ", 1)[1]


def timing_verdict(result: TimingComparison, threshold: Threshold, alpha: float) -> tuple[str, float]:
    """(verdict, one-sided p-value in the direction of the change) for a timing comparison.

    "regression"/"improved": beyond the threshold and significant; "noise": beyond the threshold
    but not significant; "ok": within the threshold.
    """
    higher_better = METRICS[threshold.metric].better == "higher"
    p_worse, p_better = (result.p_less, result.p_greater) if higher_better else (result.p_greater, result.p_less)
    # The CI excludes "no change" on the worse (better) side.
    ci_worse = result.ci_high < 1.0 if higher_better else result.ci_low > 1.0
    ci_better = result.ci_low > 1.0 if higher_better else result.ci_high < 1.0
    worsening = threshold.worsening_pct(result.baseline, result.current)
    if worsening > threshold.pct:
        return ("regression" if p_worse < alpha and ci_worse else "noise"), p_worse
    if -worsening > threshold.pct and p_better < alpha and ci_better:
        return "improved", p_better
    return "ok", (p_worse if worsening > 0 else p_better)


def tests_disagree(result: TimingComparison, p: float, alpha: float, runs: str = "runs") -> str:
    """Why the rule's two tests part ("" when they agree): the U test's p counts every step as an
    independent sample, so with many steps it is small even when whole runs disagree with each
    other; the interval resamples `runs` first, so it carries their spread. `p` is timing_verdict's."""
    excludes_one = result.ci_low > 1.0 or result.ci_high < 1.0
    if p < alpha and not excludes_one:
        return f"p < {alpha:g} counts steps as independent, but the {runs}' {CONFIDENCE_PCT}% CI spans 1"
    if p >= alpha and excludes_one:
        return f"the {runs}' {CONFIDENCE_PCT}% CI excludes 1, but p >= {alpha:g}"
    return ""
