"""Records -> history series: one per workload configuration, its runs in the order they ran.

A series is every ok record whose identity (RunSpec.identity()) agrees apart from the repeat index
and the `debug` knobs (bench.analysis.stats.series_key): model, strategy, precision, cluster, nodes, ranks per
node, batch, sequence and the other settings that define the work. The sweep name is not part of it,
so nightly sweeps, clusters' results folders and repeats all join their configuration's series.

Each record is one run; its value is the metric it measured (tokens/s, median step time or MFU), and
its step times are what the magnitude's interval resamples (bench.analysis.stats, like `check`).

The scaling efficiency at a family's largest node count (the family: a series without what scales,
bench.analysis.stats.series_key(across_nodes=True)) is a series too: one value per sweep run (a results
folder of a sweep) that measured both the family's smallest and largest node count, the pooled
median tokens/s of each (repeats pooled) put through bench.analysis.stats.scaling_efficiency.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.analysis.check.points import PointData, mfu_per_token_rate, record_steps
from bench.analysis.check.thresholds import METRICS, STEP_TIMINGS
from bench.analysis.check.timings import TimingComparison, compare_timing_metric, timing_runs
from bench.analysis.stats import Comparison, compare_runs, pooled_median, pooled_medians, scaling_efficiency, series_key
from bench.schema.labels import point_label
from bench.schema.metrics import get
from bench.schema.preflight import PreflightResult
from bench.schema.record import RunResult

EFFICIENCY = get("scaling_efficiency").name
# What `--metric` may name: the timings `check` knows (one definition of which way is better).
HISTORY_METRICS = STEP_TIMINGS


@dataclass(frozen=True)
class Run:
    """One run of a series: when and in which sweep it ran, its value, and the record behind it."""

    sweep: str
    started_at: datetime
    value: float
    samples: list[list[float]]  # step times of the run (timings) or [value] (efficiency)
    record: RunResult  # environment, debug knobs, loss curve, git sha

    @property
    def name(self) -> str:
        """`nightly 2026-05-03 02:00:01` (UTC): how tables name a run."""
        return f"{self.sweep} {self.started_at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S}"


@dataclass
class Series:
    """The runs of one configuration (or one family's efficiency) in time order."""

    key: str  # 12 hex digits of the series key
    label: str
    metric: str
    runs: list[Run] = field(default_factory=list)
    tokens_per_step: float | None = None
    mfu_per_token_rate: float | None = None

    @property
    def higher_is_better(self) -> bool:
        return get(self.metric).better == "higher"

    @property
    def values(self) -> list[float]:
        return [run.value for run in self.runs]

    def compare(self, before: Sequence[Run], after: Sequence[Run]) -> TimingComparison:
        """The two sides' medians, ratio (after / before) and its bootstrap interval (bench.analysis.stats)."""
        return self.comparison(before, after, compare_runs(*self.samples(before, after)))

    def samples(self, before: Sequence[Run], after: Sequence[Run]) -> tuple[list[list[float]], list[list[float]]]:
        """The runs of samples `compare` compares, before and after (for bench.analysis.stats.compare_many,
        which computes the comparisons of many change points together)."""
        if self.metric == EFFICIENCY:
            return [s for r in before for s in r.samples], [s for r in after for s in r.samples]
        return timing_runs(self._point(before), self.metric), timing_runs(self._point(after), self.metric)

    def comparison(self, before: Sequence[Run], after: Sequence[Run], steps: Comparison) -> TimingComparison:
        """`compare` from the comparison of its `samples`, computed already."""
        if self.metric == EFFICIENCY:
            return TimingComparison(
                steps.baseline_median, steps.current_median, steps.ratio, steps.ci_low, steps.ci_high,
                steps.p_greater, steps.p_less, steps.n_baseline, steps.n_current, len(before), len(after),
            )  # fmt: skip
        return compare_timing_metric(self._point(before), self._point(after), self.metric, samples=steps)

    def ratio(self, before: Sequence[Run], after: Sequence[Run]) -> float:
        """after / before of the pooled medians, without an interval (`compare`'s ratio, cheaply)."""
        base = pooled_median([s for r in before for s in r.samples])
        cur = pooled_median([s for r in after for s in r.samples])
        if self.metric in (EFFICIENCY, "step_time_s"):
            return cur / base
        return base / cur  # tokens/s and MFU: a constant over the step time

    def _point(self, runs: Sequence[Run]) -> PointData:
        point = PointData(self.key, self.label, {}, "ok", len(runs))
        point.step_runs = [samples for run in runs for samples in run.samples]
        point.tokens_per_step, point.mfu_per_token_rate = self.tokens_per_step, self.mfu_per_token_rate
        return point


def run_time(record: RunResult | PreflightResult) -> datetime | None:
    """When the run started (its end where the start is unknown), timezone-aware (UTC if unstated)."""
    for stamp in (record.started_at, record.finished_at):
        if stamp:
            try:
                moment = datetime.fromisoformat(stamp)
            except ValueError:
                continue
            return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    return None


def metric_value(record: RunResult, metric: str) -> float | None:
    """The record's value of a history metric (None where it did not measure it, e.g. MFU on CPU)."""
    if metric not in HISTORY_METRICS:
        raise ValueError(f"unknown history metric {metric!r}; allowed: {', '.join(HISTORY_METRICS)}")
    return METRICS[metric].value(record)


def _short(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _label(identity: dict[str, Any], key: str) -> str:
    return f"{point_label(identity)} {identity['cluster']['name']} #{key[:6]}"


@dataclass(frozen=True)
class _Timed:
    """An ok record with its run time and its series' keys, computed once for every series built from it."""

    moment: datetime
    record: RunResult
    identity: dict[str, Any]
    key: str  # series_key(identity)
    family: str  # series_key(identity, across_nodes=True)


def _timed(records: Iterable[RunResult], since: datetime | None) -> list[_Timed]:
    """Ok records with a known run time (at or after `since`), in run order (ties: sweep, repeat, id),
    each with its identity and keys. A family key is a function of its series key (both drop the same
    fields from the identity, the family more): it is computed once per series, not once per run."""
    timed = [(run_time(r), r) for r in records if r.status == "ok"]
    kept = [(t, r) for t, r in timed if t is not None and (since is None or t >= since)]
    kept.sort(key=lambda item: (item[0], item[1].sweep, item[1].spec.repeat, item[1].point_id))
    families: dict[str, str] = {}
    known: dict[str, tuple[dict[str, Any], str]] = {}
    out = []
    for moment, record in kept:
        identity, key = _identity_and_key(record, known)
        family = families.get(key)
        if family is None:
            family = families[key] = series_key(identity, across_nodes=True)
        out.append(_Timed(moment, record, identity, key, family))
    return out


def _identity_and_key(record: RunResult, known: dict[str, tuple[dict[str, Any], str]]) -> tuple[dict[str, Any], str]:
    """The record's spec's identity and series key, computed once per distinct spec: the runs of a
    configuration share one spec (a nightly store holds far fewer specs than runs), and its JSON text
    without its None fields is cheap next to the identity and its key. The text is a sound key when it
    holds no `null`: a spec's class is fixed, so a field it leaves out is None, and every other
    value is written as itself (1, 1.0 and true apart); only NaN, infinities and a None inside a list or
    dict are written `null`, and such a spec is computed on its own."""
    text = record.spec.model_dump_json(exclude_none=True)
    pair = known.get(text)
    if pair is None:
        identity = record.spec.identity()
        pair = (identity, series_key(identity))
        if "null" not in text:
            known[text] = pair
    return pair


def history_series(records: Iterable[RunResult], metric: str, since: datetime | None = None) -> list[Series]:
    """What `fsdp-bench history` follows: the metric's series (`build_series`) and, for tokens/s, the
    efficiency series beside them (`efficiency_series`), from one pass over the records."""
    timed = _timed(records, since)
    return _build_series(timed, metric) + (_efficiency_series(timed) if metric == "tokens_per_s" else [])


def build_series(records: Iterable[RunResult], metric: str, since: datetime | None = None) -> list[Series]:
    """One series per configuration, of the runs that measured `metric`, in order of their first run."""
    return _build_series(_timed(records, since), metric)


def _build_series(timed: list[_Timed], metric: str) -> list[Series]:
    by_key: dict[str, Series] = {}
    for entry in timed:
        record = entry.record
        value = metric_value(record, metric)
        if value is None:
            continue
        series = by_key.get(entry.key)
        if series is None:
            key = _short(entry.key)
            series = by_key[entry.key] = Series(key, _label(entry.identity, key), metric)
            series.tokens_per_step = float(record.metrics.tokens_per_step or record.spec.tokens_per_step)
            series.mfu_per_token_rate = mfu_per_token_rate(record)
        series.runs.append(Run(record.sweep, entry.moment, value, [record_steps(record)], record))
    return list(by_key.values())


def efficiency_series(records: Iterable[RunResult], since: datetime | None = None) -> list[Series]:
    """Per family with at least two node counts: the efficiency at its largest node count, one run per
    sweep run that measured the smallest and the largest (repeats pooled)."""
    return _efficiency_series(_timed(records, since))


def _efficiency_series(timed: list[_Timed]) -> list[Series]:
    families: dict[str, dict[tuple[str, str], dict[int, list[_Timed]]]] = {}
    folders: dict[str, str] = {}
    for entry in timed:
        record = entry.record
        if not record.metrics.step_times_s:
            continue
        cell = families.setdefault(entry.family, {}).setdefault(_sweep_run(record, folders), {})
        cell.setdefault(record.spec.nodes, []).append(entry)
    # Each efficiency run's two sides (the repeats at the largest and the smallest node count), all
    # sides' pooled medians in one pooled_medians call (the same numbers as one pooled_median each).
    measured: list[tuple[str, int, int, list[tuple[list[_Timed], list[_Timed]]]]] = []
    sides: list[list[_Timed]] = []
    for family, sweep_runs in families.items():
        nodes = sorted({n for by_nodes in sweep_runs.values() for n in by_nodes})
        if len(nodes) < 2:
            continue
        low, high = nodes[0], nodes[-1]
        pairs = [(by[high], by[low]) for by in sweep_runs.values() if low in by and high in by]
        measured.append((family, low, high, pairs))
        sides += [side for pair in pairs for side in pair]
    rates = iter(_tokens_per_s(sides))
    out = []
    for family, low, high, pairs in measured:
        key = _short(family)
        label = ""
        runs = []
        for at_high, _ in pairs:
            first = at_high[0]
            label = label or f"{_label(first.identity, key)} efficiency vs {low} node(s)"
            value = float(scaling_efficiency(next(rates), next(rates), high, low))
            runs.append(Run(first.record.sweep, first.moment, value, [[value]], first.record))
        if runs:
            out.append(Series(key, label, EFFICIENCY, sorted(runs, key=lambda r: (r.started_at, r.sweep))))
    return out


def _sweep_run(record: RunResult, folders: dict[str, str]) -> tuple[str, str]:
    """Which sweep run a record belongs to: its sweep and results folder (the point folder's parent).
    `folders`: the parent of each folder met so far (a sweep's points share one, so no Path is built
    per record)."""
    if not record.log_dir:
        return record.sweep, ""
    head, _, tail = record.log_dir.rpartition("/")
    if not head or tail in ("", ".", ".."):  # "/x", "x", "x/", "x/.": what pathlib makes of it
        return record.sweep, str(Path(record.log_dir).parent)
    parent = folders.get(head)
    if parent is None:
        parent = folders[head] = str(Path(head))  # Path(a/b/c).parent is Path(a/b)
    return record.sweep, parent


def _tokens_per_s(sides: list[list[_Timed]]) -> list[float]:
    """Each side's tokens per step over the pooled median step time of its repeats (bench.analysis.stats'
    center), the medians of all sides in one call."""
    medians = pooled_medians([[record_steps(entry.record) for entry in side] for side in sides])
    out = []
    for side, median in zip(sides, medians, strict=True):
        record = side[0].record
        out.append(float(record.metrics.tokens_per_step or record.spec.tokens_per_step) / float(median))
    return out
