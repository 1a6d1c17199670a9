"""Per-metric regression thresholds, parsed from strings such as `tokens_per_s:-5%`.

The sign says which way is worse: a drop for higher-is-better metrics (`tokens_per_s:-5%`),
a rise for lower-is-better ones (`peak_mem_bytes:+0%`). Workload counters (`params`,
`flops_per_token`) define what is measured, so a change either way beyond the threshold fails.
A group name (`comm_bytes_per_step`) sets the threshold of all its members.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.config.problems import did_you_mean
from bench.schema.metrics import Metric, find, shown_in

# What `check` compares, generated from the metric catalogue (bench/schema/metrics.py: views "check"):
# timings with the statistics engine (per step: every timed step is a sample; per run: one value per
# run, e.g. energy per token), counters exactly.
METRICS: dict[str, Metric] = {m.name: m for m in shown_in("check")}
TIMINGS = tuple(name for name, m in METRICS.items() if m.kind == "timing")
COUNTERS = tuple(name for name, m in METRICS.items() if m.kind == "counter")
STEP_TIMINGS = tuple(name for name in TIMINGS if METRICS[name].per == "step")  # what history can follow
# Dotted names form groups (comm_bytes_per_step.all_gather, ...): a threshold on the group sets every member.
GROUPS = tuple(dict.fromkeys(name.rsplit(".", 1)[0] for name in METRICS if "." in name))

# 5%: the project's CI default; scripts/validate_checks.py measures its false-alarm and
# detection rates on this machine. Smaller changes need many more samples to tell apart from noise.
DEFAULT_TIMING_PCT = 5.0
# Counters are deterministic for a fixed spec and software stack: any worsening is a regression.
DEFAULT_COUNTER_PCT = 0.0

# A percentage as thresholds write it: `5%`, `5`, `2.5%` (one pattern for --threshold and --target-shift).
_PERCENT = r"(?P<pct>\d+(?:\.\d+)?)\s*%?"
_SYNTAX = re.compile(r"^\s*(?P<metric>[a-z_.]+)\s*:\s*(?P<sign>[+-]?)\s*" + _PERCENT + r"\s*$")
_PERCENTAGE = re.compile(r"^\s*" + _PERCENT + r"\s*$")


class ThresholdError(ValueError):
    """A threshold string that does not parse or names an unknown metric (exit 2)."""


@dataclass(frozen=True)
class Threshold:
    """How much worse a metric may get (in percent, >= 0) before it counts as a regression."""

    metric: str
    pct: float

    @property
    def definition(self) -> Metric:
        return METRICS[self.metric]

    def worsening_pct(self, baseline: float, current: float) -> float:
        """How much worse `current` is than `baseline`, in percent (negative: better)."""
        change = (current / baseline - 1.0) * 100.0 if baseline else (0.0 if current == baseline else float("inf"))
        better = self.definition.better
        if better == "higher":
            return -change
        if better == "lower":
            return change
        return abs(change)

    def is_exceeded(self, baseline: float, current: float) -> bool:
        """True when the worsening is beyond the threshold (a 0% threshold fails any worsening)."""
        return self.worsening_pct(baseline, current) > self.pct

    def __str__(self) -> str:
        sign = {"higher": "-", "lower": "+", "equal": "±"}[self.definition.better]
        return f"{self.metric}:{sign}{self.pct:g}%"


def parse_percentage(text: str, flag: str) -> float:
    """A percentage strictly between 0 and 100 written like a threshold's (`10%` or `10`), as a
    fraction; ThresholdError naming `flag` otherwise."""
    match = _PERCENTAGE.match(text)
    pct = float(match["pct"]) if match else None
    if pct is None or not 0.0 < pct < 100.0:
        raise ThresholdError(f"{flag} {text!r}: expected a percentage between 0 and 100, e.g. 10%")
    return pct / 100.0


def parse_threshold(text: str) -> list[Threshold]:
    """Parse `metric:[+-]N%` into one Threshold per metric it names (a group names several)."""
    match = _SYNTAX.match(text)
    if not match:
        raise ThresholdError(
            f"--threshold {text!r}: expected METRIC:[+-]N%, e.g. tokens_per_s:-5% or peak_mem_bytes:+0%"
        )
    name, sign, pct = match["metric"], match["sign"], float(match["pct"])
    known = find(name)  # a metric's name, or an alias the catalogue declares (its results.csv column)
    members = [known.name] if known is not None and known.name in METRICS else []
    members = members or [m for m in METRICS if m.startswith(name + ".")]
    if not members:
        hint = did_you_mean(name, [*METRICS, *GROUPS])
        allowed = ", ".join([*METRICS, *GROUPS])
        raise ThresholdError(f"--threshold {text!r}: unknown metric {name!r}{hint}; allowed: {allowed}")
    better = METRICS[members[0]].better
    wrong_sign = (better == "higher" and sign == "+") or (better == "lower" and sign == "-")
    if wrong_sign:
        example = f"{name}:{'-' if better == 'higher' else '+'}{pct:g}%"
        raise ThresholdError(
            f"--threshold {text!r}: {name} is {better}-is-better, so its threshold is written {example}"
        )
    return [Threshold(member, pct) for member in members]


class Thresholds:
    """The threshold of every metric: defaults (5% for timings, 0% for counters) plus overrides."""

    def __init__(self, overrides: list[Threshold] | None = None) -> None:
        self._by_metric = {
            name: Threshold(name, DEFAULT_TIMING_PCT if m.kind == "timing" else DEFAULT_COUNTER_PCT)
            for name, m in METRICS.items()
        }
        for threshold in overrides or []:
            self._by_metric[threshold.metric] = threshold

    @classmethod
    def parse(cls, texts: list[str] | None) -> Thresholds:
        """Thresholds from `--threshold` strings; later strings win over earlier ones."""
        return cls([t for text in texts or [] for t in parse_threshold(text)])

    def __getitem__(self, metric: str) -> Threshold:
        return self._by_metric[metric]

    def describe(self) -> str:
        """One line: every timing threshold, and the counter thresholds that are not exact."""
        loose = [str(self[m]) for m in COUNTERS if self[m].pct != DEFAULT_COUNTER_PCT]
        exact = "other counters exact" if loose else "counters exact"
        return ", ".join([str(self[m]) for m in TIMINGS] + loose) + f"; {exact}"
