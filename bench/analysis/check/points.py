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
from operator import itemgetter
from typing import Any, NamedTuple

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
    """Group records by matching identity (pooling repeats) into PointData, in first-seen order:
    the points of one batch of them (summarize_runs, points_from_batches)."""
    return points_from_batches([summarize_runs(records)])


class FirstRun(NamedTuple):
    """What a point keeps of its first ok run (the one of lowest repeat index, the earliest of equals)."""

    repeat: int
    fingerprint: dict[str, Any]
    counters: dict[str, float]
    tokens_per_step: float
    mfu_per_token_rate: float | None
    hosts: list[str]


@dataclass
class RunBatch:
    """What the points need of some records, and nothing else of them: small enough to send between
    processes (a forked reader summarizes its share of a results folder: bench/analysis/check/loading.py),
    where the records themselves would cost as much to pickle as to validate again.

    Per record, in order: its identity key, status and repeat index, and for an ok record its timed
    step times, loss curve and run-level values; per identity key: the identity, and the batch's first
    ok run of it (`FirstRun`: a point's first ok run is the first of its batches' first ones); per
    spec key (`summarize_runs`), its identity key, for a batch made knowing this one."""

    keys: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)
    steps: list[list[float]] = field(default_factory=list)
    losses: list[list[float]] = field(default_factory=list)
    values: list[dict[str, float]] = field(default_factory=list)
    identities: dict[str, dict[str, Any]] = field(default_factory=dict)
    firsts: dict[str, FirstRun] = field(default_factory=dict)
    spec_keys: dict[bytes, str] = field(default_factory=dict)  # a spec's key (_SPEC_KEY_EXCLUDE) -> its identity's key


def summarize_runs(records: Iterable[RunResult], known: RunBatch | None = None) -> RunBatch:
    """The RunBatch of these records (`known`: another batch whose specs' identities it need not compute again).

    Repeats of a point have one spec but for its repeat index, and so one identity: the identity
    and its key are computed once per spec as written without that index and the fields no identity
    holds (its JSON, from pydantic's serializer: a fraction of what the identity and its hash
    cost), not once per record, nor for a spec `known` has (its identity is there). The counters
    and run-level values are read column by column over the records that need them (PathReader: a
    pydantic attribute read costs several dict lookups).
    """
    batch = RunBatch()
    keys = batch.spec_keys = dict(known.spec_keys) if known is not None else {}
    to_json = RunSpec.__pydantic_serializer__.to_json
    oks: list[RunResult] = []
    firsts: dict[str, RunResult] = {}
    for record in records:
        spec = to_json(record.spec, exclude=_SPEC_KEY_EXCLUDE)
        key = keys.get(spec)
        if key is None:
            identity = match_identity(record.spec)
            key = keys[spec] = identity_key(identity)
            batch.identities[key] = identity
        batch.keys.append(key)
        batch.statuses.append(record.status)
        batch.repeats.append(record.spec.repeat)
        if record.status != "ok":
            batch.steps.append([])
            batch.losses.append([])
            continue
        oks.append(record)
        batch.steps.append(record_steps(record))
        batch.losses.append(list(record.metrics.losses or ()))
        first = firsts.get(key)
        if first is None or record.spec.repeat < first.spec.repeat:
            firsts[key] = record
    columns = run_value_columns(oks)
    rows = iter(
        [{name: column[i] for name, column in columns.items() if column[i] is not None} for i in range(len(oks))]
    )
    batch.values = [next(rows) if status == "ok" else {} for status in batch.statuses]
    for (key, first), counters in zip(firsts.items(), counters_of(list(firsts.values())), strict=True):
        batch.firsts[key] = FirstRun(
            first.spec.repeat, first.env.fingerprint(), counters,
            float(first.metrics.tokens_per_step or first.spec.tokens_per_step), mfu_per_token_rate(first),
            list(first.env.hostnames),
        )  # fmt: skip
    return batch


def points_from_batches(batches: Sequence[RunBatch]) -> list[PointData]:
    """The points of the records of these batches, in order (as points_from_records of them all):
    grouped by identity key in first-seen order; a point's runs are its ok records by repeat index
    (equal indices in record order), the rest taken from the first of them."""
    identities: dict[str, dict[str, Any]] = {}
    firsts: dict[str, FirstRun] = {}
    groups: dict[str, list[tuple[str, int, list[float], list[float], dict[str, float]]]] = {}
    for batch in batches:
        for key, identity in batch.identities.items():
            identities.setdefault(key, identity)
        for key, first in batch.firsts.items():
            known = firsts.get(key)
            if known is None or first.repeat < known.repeat:
                firsts[key] = first
        runs = zip(batch.statuses, batch.repeats, batch.steps, batch.losses, batch.values, strict=True)
        for key, run in zip(batch.keys, runs, strict=True):
            groups.setdefault(key, []).append(run)
    return [_pool(key, identities[key], group, firsts.get(key)) for key, group in groups.items()]


def _spec_key_exclude() -> dict[str, Any]:
    """What a spec's JSON leaves out to be its grouping key: the repeat index (match_identity drops
    it), and the fields no identity holds (their role: `excluded`; descriptions such as a model's
    source or a cluster's device table, more than half the JSON). Two specs whose keys are equal
    have one matching identity; writing the shorter JSON takes a third less time."""
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
_repeat_of = itemgetter(1)  # a run's repeat index


def _pool(key: str, identity: dict[str, Any], group: list[tuple], first: FirstRun | None) -> PointData:
    """One point from its runs ((status, repeat, steps, losses, values) each): step times, loss
    curves and run-level values of every ok run by repeat index, the rest from its first ok run."""
    ok = sorted((run for run in group if run[0] == "ok"), key=_repeat_of)
    point = PointData(key, point_label(identity, key), identity, "ok" if ok else group[0][0], len(ok))
    if first is None:
        return point
    point.fingerprint = first.fingerprint
    point.counters = first.counters
    point.step_runs = [steps for _, _, steps, _, _ in ok if steps]
    point.tokens_per_step = first.tokens_per_step
    point.mfu_per_token_rate = first.mfu_per_token_rate
    point.loss_runs = [losses for _, _, _, losses, _ in ok if losses]
    point.hosts = first.hosts
    for values in (run[4] for run in ok):  # run by run, as each run's values come in
        for name, value in values.items():
            point.run_values.setdefault(name, []).append(value)
    return point
