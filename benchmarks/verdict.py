"""`make bench`'s verdict on each benchmark: `check`'s own timing rule on each clock.

The rule is bench.analysis.check.compare.compare_timing (the statistics of bench.analysis.stats):
a benchmark regressed when its median is more than SLOWDOWN_PCT above the reference's, with a
one-sided Mann-Whitney U p below `check`'s alpha and a bootstrap interval of the median ratio
that excludes 1. Each run is one sample (a run-level timing, as `check` treats one: a one-sample
run), on two clocks: CPU time, and wall time where both sides have it. A median beyond the limit
without significance is *inconclusive*: a warning to measure again, not a failure (a run is a
whole process, processes of the same code differ, and failing on chance would fail identical code).
A sitting judges every benchmark on each clock at once and any one failing fails it, so each test's
alpha is check's divided by their number (bench.analysis.stats.family_alpha): the chance that identical
code fails a sitting stays below check's alpha, not below it once per test.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from measuring import Measured

from bench.analysis.check.compare import ALPHA, Finding, compare_timing
from bench.analysis.check.points import PointData
from bench.analysis.check.thresholds import Threshold
from bench.analysis.stats import family_alpha

# A slowdown beyond this, significant by check's rule, in CPU time or in wall time, fails `make bench`.
SLOWDOWN_PCT = 20.0
# Step times are what check's timing rule compares; a benchmark's time is one, lower is better.
RULE = Threshold("step_time_s", SLOWDOWN_PCT)
__all__ = ["ALPHA", "SLOWDOWN_PCT", "Comparison", "comparison_rows", "headers", "judge"]


def point(name: str, samples: list[float]) -> PointData:
    """A benchmark's samples as check's point: one run-level sample per run."""
    data = PointData(name, name, {}, "ok", len(samples))
    data.step_runs = [[s] for s in samples]
    return data


def judge(name: str, reference: list[float], current: list[float], alpha: float = ALPHA) -> Finding:
    """check's timing finding of the current samples against the reference's (lower is better)."""
    return compare_timing(name, point(name, reference), point(name, current), RULE, alpha=alpha, gating=True)


@dataclass(frozen=True)
class Judged:
    """One benchmark's findings against a reference: by CPU time, and by wall time where both sides
    have wall samples (None otherwise)."""

    cpu: Finding
    wall: Finding | None

    @property
    def clocks(self) -> list[tuple[str, Finding]]:
        return [(clock, f) for clock, f in (("CPU", self.cpu), ("wall", self.wall)) if f is not None]

    @property
    def failing(self) -> list[tuple[str, Finding]]:
        return [(clock, f) for clock, f in self.clocks if f.fails]

    @property
    def verdict(self) -> str:
        if failing := self.failing:
            return "REGRESSION (" + ", ".join(clock for clock, _ in failing) + ")"
        return self.cpu.verdict


def has_wall(m: Measured, reference: Measured) -> bool:
    return bool(m.wall_s and reference.wall_s)


def judged(m: Measured, reference: Measured, alpha: float = ALPHA) -> Judged:
    wall = judge(m.name, reference.wall_s, m.wall_s, alpha) if has_wall(m, reference) else None
    return Judged(judge(m.name, reference.cpu_s, m.cpu_s, alpha), wall)


def headers(against: str) -> tuple[str, ...]:
    return ("benchmark", f"CPU s: {against}", "now", "change", "p, 95% CI, n", f"wall s: {against}", "now",
            "change", "verdict")  # fmt: skip


def _columns(samples: list[float], before: list[float]) -> list[str]:
    """Reference median, current median and change of one clock ("" where a side has no samples)."""
    if not samples or not before:
        return ["", f"{statistics.median(samples):.4g}" if samples else "", ""]
    now, was = statistics.median(samples), statistics.median(before)  # check's pooled median of one-sample runs
    return [f"{was:.4g}", f"{now:.4g}", f"{(now / was - 1) * 100:+.1f}%"]


@dataclass
class Comparison:
    """A table's rows; the benchmarks that regressed against its reference (a line each saying by how
    much), those slower by more than the limit without significance (`inconclusive`, a line each),
    those that failed to run (with why); and each judged benchmark's change, as a line (`changes`).
    `tests`: the shift tests judged together (benchmarks x clocks), `alpha`: each one's level."""

    tests: int = 0
    alpha: float = ALPHA
    rows: list[list[str]] = field(default_factory=list)
    regressed: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    inconclusive: dict[str, str] = field(default_factory=dict)
    changes: dict[str, str] = field(default_factory=dict)

    @property
    def significance(self) -> str:
        """The level each test is judged at, and why ("p < 0.0038 each (0.05 over 13 test(s): benchmarks x clocks)")."""
        return f"p < {self.alpha:.2g} each ({ALPHA:g} over {self.tests} test(s): benchmarks x clocks)"

    @property
    def failing(self) -> list[str]:
        """The benchmarks that fail `make bench`: those that regressed or did not run."""
        return list(dict.fromkeys([*self.failed, *self.regressed]))

    @property
    def failures(self) -> list[str]:
        """What fails `make bench`, a line each: a benchmark that did not run, and each clock of a regression."""
        lines = [f"{name} did not run: {why}" for name, why in self.failed.items()]
        return lines + [line for found in self.regressed.values() for line in found]

    @property
    def warnings(self) -> list[str]:
        return [
            f"{name}: inconclusive: {why}; measure it again (--only {name})" for name, why in self.inconclusive.items()
        ]


def comparison_rows(measured: list[Measured], references: dict[str, Measured], against: str) -> Comparison:
    """Each benchmark against its reference (by name; `against` names them in the lines), by check's
    timing rule on each clock, each test at family_alpha over all of them; a benchmark without a
    reference is `new` and does not gate."""
    judged_pairs = [(m, references[m.name]) for m in measured if not m.failure and m.name in references]
    tests = sum(1 + has_wall(m, base) for m, base in judged_pairs)
    result = Comparison(tests=tests, alpha=family_alpha(ALPHA, tests))
    for m in measured:
        base = references.get(m.name)
        if m.failure:
            result.rows.append([m.name, "", "", "", "", "", "", "", "FAILED TO RUN"])
            result.failed[m.name] = m.failure
            continue
        if base is None:
            result.rows.append([m.name, *_columns(m.cpu_s, []), "", *_columns(m.wall_s, []), f"new (not in {against})"])
            continue
        found = judged(m, base, result.alpha)
        cpu, wall = _columns(m.cpu_s, base.cpu_s), _columns(m.wall_s, base.wall_s)
        result.rows.append([m.name, *cpu, found.cpu.confidence, *wall, found.verdict])
        clocks = [(clock, f) for clock, f in found.clocks if f.change is not None]  # None: too few samples
        for clock, finding in found.failing:
            result.regressed.setdefault(m.name, []).append(
                f"{m.name} is {finding.change * 100:.1f}% slower than {against} in {clock} time "
                f"({finding.baseline:.4g} s -> {finding.current:.4g} s, {finding.confidence}; limit {SLOWDOWN_PCT:g}%)"
            )
        result.changes[m.name] = ", ".join(
            f"{f.change * 100:+.1f}% in {clock} time ({f.confidence})" for clock, f in clocks
        )
        if m.name not in result.regressed and (slow := [c for c, f in clocks if f.change * 100 > SLOWDOWN_PCT]):
            result.inconclusive[m.name] = (
                f"{' and '.join(slow)} time more than {SLOWDOWN_PCT:g}% slower than {against} but not "
                f"significantly: {result.changes[m.name]}"
            )
    return result
