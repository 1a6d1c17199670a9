"""Results against a baseline, what `fsdp-bench check` decides: parse the thresholds, load both
sides, apply the environment rule (fingerprint.py), then compare (compare.py).

Bad input (a threshold that does not parse, a side that cannot be read) is a ConfigError naming it;
a refused environment change is an outcome, not an error: its lines say why and no comparison is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.analysis.check import fingerprint
from bench.analysis.check.baseline import BaselineError, Side, load_side
from bench.analysis.check.compare import CheckReport, compare
from bench.analysis.check.numerics import LOSS_RTOL
from bench.analysis.check.thresholds import ThresholdError, Thresholds
from bench.config.problems import ConfigError


@dataclass(frozen=True)
class CheckRequest:
    """The check command's settings (docs/checks.md)."""

    results: Path
    baseline: Path
    thresholds: list[str] = field(default_factory=list)  # `METRIC:[+-]N%` each
    allow_env_change: bool = False
    gate_timings: bool = True
    alpha: float = 0.05
    min_runs: int = 2
    numerics: bool = True
    loss_rtol: float = LOSS_RTOL


@dataclass
class CheckOutcome:
    baseline: Side
    current: Side
    env: fingerprint.EnvDecision
    gate_timings: bool = True
    report: CheckReport | None = None  # None: the environment change was refused

    @property
    def problems(self) -> list[str]:
        """Records of either side that could not be read (skipped)."""
        return self.baseline.problems + self.current.problems


def run_check(request: CheckRequest) -> CheckOutcome:
    """Load, decide on the environment, compare (ConfigError on bad input)."""
    try:
        thresholds = Thresholds.parse(request.thresholds)
        base = load_side(request.baseline)
        cur = load_side(request.results)
    except (ThresholdError, BaselineError) as exc:
        raise ConfigError([str(exc)]) from None
    env = fingerprint.decide(
        base.env, cur.env, allow_change=request.allow_env_change, gate_timings=request.gate_timings
    )
    outcome = CheckOutcome(base, cur, env, request.gate_timings)
    if env.refused:
        return outcome
    outcome.report = compare(
        base.points, cur.points, thresholds, gate_timings=request.gate_timings, alpha=request.alpha,
        min_runs=request.min_runs, numerics=request.numerics, loss_rtol=request.loss_rtol,
    )  # fmt: skip
    outcome.report.env_lines = env.lines
    return outcome
