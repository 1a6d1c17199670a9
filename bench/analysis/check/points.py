"""One comparable point: its matching identity, deterministic counters and per-step step times.

Both sides of a check (a results folder or a saved baseline) become a list of `PointData`.
Repeats of a point (`sweep.repeats=K`: the same spec but `repeat`) are grouped into one
`PointData` whose step times keep one list per run, so the statistics can see run-to-run spread.
Every timing metric (step time, tokens/s, MFU) derives from those step times (bench/analysis/check/timings.py);
run-level metrics (energy per token, utilization) keep one value per run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.analysis.check.thresholds import METRICS
from bench.schema.identity import FieldPath, declarations, without
from bench.schema.labels import point_label as short_label
from bench.schema.metrics import PathReader
from bench.schema.record import RunResult
from bench.schema.spec import CHECK_DROPPED, RunSpec


@dataclass
class PointData:
    """Everything `check` compares about one point, pooled over its repeats."""

    key: str
    label: str
    identity: dict[str, Any]
    status: str
    runs: int
    counters: dict[str, float] = field(default_factory=dict)
    step_runs: list[list[float]] = field(default_factory=list)  # one list of timed step times per run
    tokens_per_step: float | None = None
    # MFU over tokens/s: a constant of the configuration (FLOPs per token / peak / devices); None
    # where MFU is unknown (CPU, a device without a published peak).
    mfu_per_token_rate: float | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    # One value per run of each run-level metric (bench/analysis/check/thresholds.py: per="run"), e.g. the
    # run's energy per token and mean device utilization from its telemetry.
    run_values: dict[str, list[float]] = field(default_factory=dict)
    loss_runs: list[list[float]] = field(default_factory=list)  # one loss curve per run (bench.analysis.check.numerics)
    hosts: list[str] = field(default_factory=list)  # where the first ok run ran (none in a baseline file)


def match_identity(spec: RunSpec) -> dict[str, Any]:
    """RunSpec.identity() without the fields whose role says check does not match on them
    (bench/schema/spec.py `CHECK_DROPPED`): the repeat index (repeats are pooled) and the slow-down
    knobs (an injected slowdown, on every rank or on one, is compared with its clean baseline;
    that is what the knobs are for)."""
    return without(spec.identity(), CHECK_DROPPED)


def identity_key(identity: dict[str, Any]) -> str:
    """A short content hash of a matching identity (what points are matched on)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def point_label(identity: dict[str, Any], key: str) -> str:
    """The point's short name (bench.schema.labels) and its key, which makes it unique."""
    return f"{short_label(identity)} #{key[:6]}"


# The catalogue's metrics a point keeps: the deterministic counters (of its first ok run), and the
# run-level timings (one value per ok run, e.g. telemetry).
_COUNTERS = tuple(m for m in METRICS.values() if m.kind == "counter")
_RUN_VALUES = tuple((name, m) for name, m in METRICS.items() if m.kind == "timing" and m.per == "run")


def record_counters(record: RunResult) -> dict[str, float]:
    """The deterministic counters a record measured (skipping nulls), as the catalogue lists them
    (bench/schema/metrics.py): peak memory counts only on CUDA, where the caching allocator's peak is
    reproducible for a fixed config; on CPU it is the process's max RSS, which is not."""
    return counters_of([record])[0]


def counters_of(records: Sequence[RunResult]) -> list[dict[str, float]]:
    """record_counters of each record, every counter's path read once over all of them (PathReader)."""
    read = PathReader(records)
    read.read_all(m.path for m in _COUNTERS if m.path)
    devices = read("spec.cluster.device_type")
    columns = [(m.name, m.exact_on, m.values_in(read)) for m in _COUNTERS]
    return [
        {name: column[i] for name, exact_on, column in columns if column[i] is not None and device in exact_on}
        for i, device in enumerate(devices)
    ]


def record_steps(record: RunResult) -> list[float]:
    """The record's timed step times (positive ones: a zero would be a broken timer)."""
    return [t for t in record.metrics.step_times_s if t > 0]


def record_run_values(record: RunResult) -> dict[str, float]:
    """The run-level metrics a record measured (telemetry; skipping nulls)."""
    return {name: column[0] for name, column in run_value_columns([record]).items() if column[0] is not None}


def run_value_columns(records: Sequence[RunResult]) -> dict[str, list[float | None]]:
    """Each run-level metric's value (None where absent) in each record, every path read once over all of them."""
    read = PathReader(records)
    read.read_all(m.path for _, m in _RUN_VALUES if m.path)
    return {name: m.values_in(read) for name, m in _RUN_VALUES}


def mfu_per_token_rate(record: RunResult) -> float | None:
    metrics = record.metrics
    if metrics.mfu is None or not metrics.tokens_per_s:
        return None
    return metrics.mfu / metrics.tokens_per_s


def points_from_records(records: Iterable[RunResult]) -> list[PointData]:
    """Group records by matching identity (pooling repeats) into PointData, in first-seen order.

    Repeats of a point have one spec but for its repeat index, and so one identity: the identity
    and its key are computed once per spec as written without that index and the fields no identity
    holds (its JSON: a fraction of what the identity and its hash cost), not once per record. A
    point's runs are its ok records by repeat index (equal indices in record order); its counters,
    environment and constants come from the first of them. The counters and run-level values are
    read column by column over the records that need them (PathReader).
    """
    keys: dict[str, str] = {}  # a spec's key (_SPEC_KEY_EXCLUDE) -> its identity's key
    identities: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[RunResult]] = {}
    for record in records:
        spec = record.spec.model_dump_json(exclude=_SPEC_KEY_EXCLUDE)
        key = keys.get(spec)
        if key is None:
            identity = match_identity(record.spec)
            key = keys[spec] = identity_key(identity)
            identities.setdefault(key, identity)
        groups.setdefault(key, []).append(record)
    ok_runs = {key: sorted((r for r in group if r.status == "ok"), key=_repeat_of) for key, group in groups.items()}
    # Read over all the records that need them, then handed out in the same order as the points take them.
    counters = iter(counters_of([runs[0] for runs in ok_runs.values() if runs]))
    oks = [record for runs in ok_runs.values() for record in runs]
    columns = run_value_columns(oks)
    values = iter(
        [{name: column[i] for name, column in columns.items() if column[i] is not None} for i in range(len(oks))]
    )
    points = []
    for key, group in groups.items():
        runs, identity = ok_runs[key], identities[key]
        point = PointData(key, point_label(identity, key), identity, "ok" if runs else group[0].status, len(runs))
        if runs:
            _fill(point, runs, next(counters), [next(values) for _ in runs])
        points.append(point)
    return points


def _repeat_of(record: RunResult) -> int:
    return record.spec.repeat


def _fill(point: PointData, runs: list[RunResult], counters: dict[str, float], values: list[dict[str, float]]) -> None:
    """A point's step times, loss curves and run-level values of every ok run (`runs`, by repeat
    index), the rest from the first of them."""
    first = runs[0]
    point.fingerprint = first.env.fingerprint()
    point.counters = counters
    point.step_runs = [steps for steps in map(record_steps, runs) if steps]
    point.tokens_per_step = float(first.metrics.tokens_per_step or first.spec.tokens_per_step)
    point.mfu_per_token_rate = mfu_per_token_rate(first)
    point.loss_runs = [list(losses) for losses in (record.metrics.losses for record in runs) if losses]
    point.hosts = list(first.env.hostnames)
    for run in values:  # run by run, as each run's values come in
        for name, value in run.items():
            point.run_values.setdefault(name, []).append(value)


def _spec_key_exclude() -> dict[str, Any]:
    """What a spec's JSON leaves out to be its grouping key: the repeat index (match_identity drops
    it), and the fields no identity holds (their role: `excluded`; descriptions such as a model's
    source or a cluster's device table, more than half the JSON). Two specs whose keys are equal
    have one matching identity, and the shorter JSON is quicker to write."""
    exclude: dict[str, Any] = {"repeat": True}
    done: list[FieldPath] = []
    for path, role in declarations(RunSpec):
        if role is None or role.enters != "excluded" or any(path[: len(d)] == d for d in done):
            continue
        done.append(path)
        node = exclude
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = True
    return exclude


_SPEC_KEY_EXCLUDE = _spec_key_exclude()
