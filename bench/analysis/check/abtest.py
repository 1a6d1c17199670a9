"""A/B on one machine: the same points under two environments, rounds alternating A and B.

Each environment is a command prefix that invokes fsdp-bench there (another virtualenv's
`fsdp-bench`, `python -m bench` of another checkout) or sets its environment (`env FOO=1`).
Rounds alternate the order (A B, B A, A B, ...) so slow drift of the machine (heat, other
jobs) falls on both sides alike. Every run writes its own results folder; the ratio B/A of
median tokens/s and its bootstrap CI come from the step times of all rounds (bench.analysis.stats:
rounds resampled, then steps), so the interval carries the round-to-round spread. The verdict is
`check`'s timing rule: significant only when the U test and the interval both say so, and a row
whose two tests part says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.analysis.check.baseline import load_side
from bench.analysis.check.compare import ALPHA, tests_disagree, timing_verdict
from bench.analysis.check.points import PointData
from bench.analysis.check.thresholds import Threshold
from bench.analysis.check.timings import compare_timing_metric, has_timing

# `check`'s timing rule with no threshold: any change that is significant by both of its tests.
AB_THRESHOLD = Threshold("tokens_per_s", 0.0)
VERDICTS = {"regression": "B slower", "improved": "B faster"}
NOT_SIGNIFICANT = "no significant difference"


@dataclass(frozen=True)
class AbRow:
    """One point's A/B result: medians of tokens/s, the ratio B/A, its CI, the one-sided p in the
    direction of the change, the verdict, and why the p and the CI disagree where they do."""

    point: str
    rounds_a: int
    rounds_b: int
    median_a: float
    median_b: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    reason: str = ""

    @property
    def verdict_text(self) -> str:
        return f"{self.verdict}: {self.reason}" if self.reason else self.verdict


def summarize(a_points: list[PointData], b_points: list[PointData], alpha: float = ALPHA) -> list[AbRow]:
    """Compare the pooled tokens/s samples of the two sides, point by point, by `check`'s rule
    (bench.analysis.check.compare.timing_verdict): B is faster or slower only when the U test's p
    is below `alpha` AND the bootstrap interval (rounds resampled) excludes 1."""
    b_by_key = {p.key: p for p in b_points}
    rows = []
    for a in sorted(a_points, key=lambda p: p.label):
        b = b_by_key.get(a.key)
        if b is None or not has_timing(a, "tokens_per_s") or not has_timing(b, "tokens_per_s"):
            continue
        result = compare_timing_metric(a, b, "tokens_per_s")
        verdict, p_value = timing_verdict(result, AB_THRESHOLD, alpha)
        verdict = VERDICTS.get(verdict, NOT_SIGNIFICANT)
        reason = tests_disagree(result, p_value, alpha, runs="rounds") if verdict == NOT_SIGNIFICANT else ""
        row = AbRow(
            a.label, a.runs, b.runs, result.baseline, result.current, result.ratio, result.ci_low, result.ci_high,
            p_value, verdict, reason,
        )  # fmt: skip
        rows.append(row)
    return rows


def load_sides(out: Path) -> tuple[list[PointData], list[PointData], dict]:
    """Both sides' points (repeats over rounds pooled) and their environment fingerprints."""
    sides = {name: load_side(out / name) if (out / name).exists() else None for name in ("A", "B")}
    points = {name: side.points if side else [] for name, side in sides.items()}
    return points["A"], points["B"], {name: side.env if side else None for name, side in sides.items()}
