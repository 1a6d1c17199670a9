"""Environment fingerprints (EnvInfo.fingerprint(): torch, CUDA, NCCL, device, platform) and
the rule for comparing results taken in different environments.

Timings from different hardware or software are not comparable, so by default `check` refuses
when fingerprints differ; `--allow-env-change` compares anyway and says so. With
`--no-gate-timings` the check gates only the deterministic counters, which do not depend on the
machine's speed, so a different fingerprint is reported but not refused: a counter that moved
under a torch upgrade is exactly what such a check is for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.analysis.check.points import PointData


@dataclass(frozen=True)
class EnvDecision:
    """Whether the check may go on, and the lines to print about the environment."""

    refused: bool
    lines: list[str]


def common_fingerprint(points: Iterable[PointData]) -> dict[str, Any] | None:
    """The fingerprint shared by every ok point (None when there is none); ValueError when they differ."""
    found = [p.fingerprint for p in points if p.status == "ok"]
    if not found:
        return None
    for other in found[1:]:
        if other != found[0]:
            diff = "; ".join(describe_differences(found[0], other))
            raise ValueError(f"results come from more than one environment ({diff})")
    return found[0]


def describe_differences(baseline: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """`field: baseline -> current` for each fingerprint field that differs."""
    keys = sorted(set(baseline) | set(current))
    return [f"{k}: {baseline.get(k)} -> {current.get(k)}" for k in keys if baseline.get(k) != current.get(k)]


def decide(
    baseline: dict[str, Any] | None, current: dict[str, Any] | None, *, allow_change: bool, gate_timings: bool
) -> EnvDecision:
    """Compare two fingerprints and apply the refusal rule described in this module's docstring."""
    if baseline is None or current is None:
        return EnvDecision(False, [])
    diffs = describe_differences(baseline, current)
    if not diffs:
        return EnvDecision(False, [])
    head = "environment changed: " + "; ".join(diffs)
    if allow_change:
        return EnvDecision(False, [head, "comparing anyway (--allow-env-change): timings may reflect the change"])
    if not gate_timings:
        return EnvDecision(False, [head, "comparing counters only (--no-gate-timings): timings are printed, not gated"])
    return EnvDecision(
        True,
        [
            head,
            "refused: timings from different environments are not comparable; "
            "pass --allow-env-change to compare anyway, or --no-gate-timings to gate counters only",
        ],
    )
