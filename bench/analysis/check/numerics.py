"""The numerics guard: a point's loss curve against its baseline's (used by `check` and `history`).

A run that got faster because a precision or sharding change silently broke training is a
regression, not a win. Every record carries its loss at every step (`metrics.losses`, warm-up
included, the mean over ranks), so the curve can be compared step by step:

- **exact** where the result must be bit-identical: the same software stack (equal environment
  fingerprints) on the same CPU hosts, where the engine's kernels and gloo's reductions are
  deterministic and the matched points share their seed (it is part of the identity). The hosts
  must match because a CPU fingerprint does not name the CPU model, whose vector units decide how
  a matrix product sums; a baseline file keeps no hosts, so against one the tolerance applies;
- within a **relative tolerance** (LOSS_RTOL) otherwise: another torch or CUDA version, or a GPU,
  whose kernels may sum in another order.

A non-finite loss (NaN, inf) fails wherever it appears. The verdict names the first step (counted
from 0, warm-up included) where the curve left the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# 1 %: between what a numerically different but healthy run does and what a broken one does. On
# this project's CPU machine (docs/results/history.md) a whole precision change (fp32 -> bf16) moved
# the `debug` model's curve by at most 0.04 % over 10 steps, a ten times larger learning rate by 4 %
# at step 5. Long GPU runs amplify rounding differences step by step: `--loss-rtol` loosens it.
LOSS_RTOL = 0.01

# Verdicts that fail a check / a history gate.
FAILING = ("diverged", "non-finite")


@dataclass(frozen=True)
class CurveVerdict:
    """One loss curve against its reference: `ok`, `diverged`, `non-finite` or `no baseline curve`."""

    verdict: str
    rule: str  # "exact" or "rtol 2%"
    step: int | None = None  # the first step that left the rule
    baseline: float | None = None  # the two losses at that step
    current: float | None = None

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING

    def describe(self) -> str:
        """One line: what happened, where, under which rule."""
        if self.verdict == "ok":
            return f"loss curve matches ({self.rule})"
        if self.verdict == "non-finite":
            return f"non-finite loss {self.current} at step {self.step}"
        if self.verdict == "diverged":
            return f"loss diverged at step {self.step}: {self.baseline:.6g} -> {self.current:.6g} ({self.rule})"
        return self.verdict


def exact_rule(
    baseline_env: dict[str, Any] | None,
    current_env: dict[str, Any] | None,
    device_type: str,
    baseline_hosts: Sequence[str] = (),
    current_hosts: Sequence[str] = (),
) -> bool:
    """Whether two curves must match exactly: the same fingerprint (software) on the same CPU hosts."""
    same_hosts = bool(baseline_hosts) and sorted(baseline_hosts) == sorted(current_hosts)
    return device_type == "cpu" and same_hosts and baseline_env is not None and baseline_env == current_env


def compare_curves(
    baseline: Sequence[float] | None, current: Sequence[float], *, exact: bool, rtol: float = LOSS_RTOL
) -> CurveVerdict:
    """The current curve against the baseline's (steps beyond the shorter curve are not compared)."""
    rule = "exact" if exact else f"rtol {rtol:.3g}"
    for step, value in enumerate(current):
        if not math.isfinite(value):
            return CurveVerdict("non-finite", rule, step, _at(baseline, step), value)
    if not baseline:
        return CurveVerdict("no baseline curve", rule)
    for step, (before, after) in enumerate(zip(baseline, current)):
        if not math.isfinite(before):
            continue  # a broken reference says nothing about this step
        if (after != before) if exact else abs(after - before) > rtol * abs(before):
            return CurveVerdict("diverged", rule, step, before, after)
    last = min(len(baseline), len(current)) - 1  # an ok verdict shows the last losses compared
    return CurveVerdict("ok", rule, None, baseline[last], current[last])


def _at(values: Sequence[float] | None, step: int) -> float | None:
    return values[step] if values and step < len(values) else None
