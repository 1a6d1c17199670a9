"""Run a validated grid: ledger decisions, repeats, one launch per world shape, failure isolation.

The order is: every point validated (bench.config.compose.load_grid) -> repeats expanded and
interleaved -> the ledger drops points already done -> pending points grouped by world
shape -> each group runs in one launch (bench.run.execute.run_group), each point recorded as
it finishes. Ctrl-C/SIGTERM stops the running launch, records its point as interrupted and
keeps everything else: the next `sweep` continues where this one stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bench.analysis.records import RESULT_FILE, write_record
from bench.config.compose import Point
from bench.run.execute import Interrupted, run_group
from bench.run.launch import Launcher
from bench.run.ledger import Decision, Ledger
from bench.run.preflight import LonePreflight, measure_alone, preflight_summary, preflight_task
from bench.schema.options import PreflightSettings
from bench.schema.preflight import PreflightResult, PreflightSummary
from bench.schema.protocol import point_dir
from bench.schema.record import RunResult
from bench.schema.spec import RunSpec


@dataclass
class SweepOutcome:
    records: list[RunResult] = field(default_factory=list)  # one per point of the grid (latest record)
    ran: list[str] = field(default_factory=list)  # point ids run in this invocation
    skipped: list[Decision] = field(default_factory=list)
    rendered: list[Path] = field(default_factory=list)  # job files written instead of run (apply=false)
    preflights: list[PreflightResult] = field(default_factory=list)
    interrupted: bool = False
    wall_s: float = 0.0

    @property
    def all_ok(self) -> bool:
        return not self.interrupted and all(r.status == "ok" for r in self.records)


@dataclass(frozen=True)
class SweepSettings:
    results_dir: Path
    force: bool = False
    retry_failed: bool = False
    repeats: int = 1
    group_launches: bool = True
    plan: bool = False
    preflight: PreflightSettings | None = None  # measure each world shape before its points
    # point id (repeat 0) -> the prediction its records carry (sweep.autotune: the search's own)
    predictions: dict[str, dict] = field(default_factory=dict)
    # world shapes already measured (sweep.autotune measures before it chooses): no second preflight
    measured: dict[tuple[int, int], PreflightSummary] = field(default_factory=dict)


def expand_repeats(points: list[Point], repeats: int) -> list[RunSpec]:
    """K copies of every point (spec.repeat = 0..K-1), interleaved: r0 of all points, then r1, ..."""
    return [p.spec.model_copy(update={"repeat": r}) for r in range(max(1, repeats)) for p in points]


class Progress(Protocol):
    """What a sweep tells whoever shows its progress (reports.progress.SweepProgress)."""

    def running(self, label: str) -> None: ...

    def finished(self, record: RunResult) -> None: ...


class NoProgress:
    """Progress that nobody watches."""

    def running(self, label: str) -> None:
        pass

    def finished(self, record: RunResult) -> None:
        pass


def group_by_world_shape(specs: list[RunSpec], grouped: bool) -> list[list[RunSpec]]:
    """Points sharing launcher, nodes and gpus_per_node run in one launch (order kept)."""
    if not grouped:
        return [[s] for s in specs]
    groups: dict[tuple, list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.launcher, spec.nodes, spec.gpus_per_node), []).append(spec)
    return list(groups.values())


def run_sweep(
    points: list[Point],
    launcher: Launcher,
    settings: SweepSettings,
    progress: Progress | None = None,
    conditions: dict | None = None,
    owner: str | None = None,
) -> SweepOutcome:
    """Run every point that the ledger says is pending; return all of the grid's records.

    With `settings.preflight`, each world shape's first launch measures the cluster first, and the
    shape's records carry what it measured (`RunResult.preflight`).
    """
    started = time.monotonic()
    specs = expand_repeats(points, settings.repeats)
    sweep_name = specs[0].sweep.name
    ledger = Ledger(settings.results_dir, sweep_name, settings.force, settings.retry_failed)
    outcome, latest = SweepOutcome(), {}
    decisions = [ledger.decide(spec) for spec in specs]
    pending = []
    for decision in decisions:
        if decision.run:
            pending.append(decision.spec)
        else:
            outcome.skipped.append(decision)
            latest[decision.spec.point_id] = decision.previous
        ledger.log("decide", decision.spec.point_id, run=decision.run, reason=decision.reason)
    predictions = _plan(specs) if settings.plan else {}
    predictions |= {s.point_id: settings.predictions[_first(s).point_id] for s in specs if _first(s).point_id in settings.predictions}  # fmt: skip
    pending = _skip_not_fitting(pending, predictions, settings.results_dir, latest, ledger)
    progress = progress or NoProgress()

    summaries: dict[tuple[int, int], PreflightSummary] = dict(settings.measured)

    def record_done(record: RunResult) -> None:
        record = _with_extra(record, "prediction", predictions.get(record.point_id), settings.results_dir)
        shape = (record.spec.nodes, record.spec.gpus_per_node)
        record = _with_extra(record, "preflight", summaries.get(shape), settings.results_dir)
        latest[record.point_id] = record
        outcome.ran.append(record.point_id)
        ledger.log("finished", record.point_id, status=record.status, error=record.error)
        progress.finished(record)

    try:
        for group in group_by_world_shape(pending, settings.group_launches):
            shape = (group[0].nodes, group[0].gpus_per_node)
            progress.running(f"{len(group)} point(s) at {shape[0]}x{shape[1]}")
            task = None
            if settings.preflight is not None and shape not in summaries:
                strategies = [s.strategy for s in pending if (s.nodes, s.gpus_per_node) == shape]
                task = preflight_task(group[0], settings.preflight, strategies, settings.results_dir)

            def preflight_done(result: PreflightResult, shape=shape, task=task) -> None:
                summaries[shape] = preflight_summary(result, task)
                outcome.preflights.append(result)
                progress.running(f"preflight {shape[0]}x{shape[1]}: {result.status}")

            run_group(
                group, launcher, settings.results_dir, on_record=record_done, on_rendered=outcome.rendered.extend,
                preflight=task, on_preflight=preflight_done, conditions=conditions, owner=owner,
            )  # fmt: skip
    except (Interrupted, KeyboardInterrupt):
        # A signal outside a launch (between points) lands here too: nothing was running to record.
        outcome.interrupted = True
    outcome.records = [latest[s.point_id] for s in specs if s.point_id in latest]
    outcome.wall_s = time.monotonic() - started
    return outcome


def _first(spec: RunSpec) -> RunSpec:
    """The point's first repeat (predictions are made per configuration)."""
    return spec if spec.repeat == 0 else spec.model_copy(update={"repeat": 0})


def preflight_first(
    spec: RunSpec,
    launcher: Launcher,
    settings: SweepSettings,
    strategies: list[str],
    conditions: dict | None = None,
    owner: str | None = None,
) -> LonePreflight:
    """Measure a world shape on its own, before any point (sweep.autotune ranks with what it measured)."""
    task = preflight_task(spec, settings.preflight, strategies, settings.results_dir)
    return measure_alone(task, launcher, settings.results_dir, conditions, owner)


def _plan(specs: list[RunSpec]) -> dict[str, dict]:
    """sweep.plan=true: the planner's prediction for every point (point_id -> plain dict)."""
    from bench.analysis.planner.skip import plan_points

    return plan_points(specs)


def _skip_not_fitting(
    pending: list[RunSpec], predictions: dict, results_dir: Path, latest: dict, ledger: Ledger
) -> list[RunSpec]:
    """Points predicted not to fit get a stored `skipped` record (with the prediction) instead of a launch."""
    if not predictions:
        return pending
    from bench.analysis.planner.skip import skipped_record

    kept = []
    for spec in pending:
        prediction = predictions[spec.point_id]
        if prediction["fits"]:
            kept.append(spec)
            continue
        record = skipped_record(spec, prediction)
        write_record(record, point_dir(results_dir, spec) / RESULT_FILE)
        latest[spec.point_id] = record
        ledger.log("planned-skip", spec.point_id, reason=record.error)
    return kept


def _with_extra(record: RunResult, field: str, value: object, results_dir: Path) -> RunResult:
    """Store what the sweep knows beside the measurement (the prediction, the world shape's
    preflight) so reports show it next to what was measured; a value already there stays."""
    if value is None or getattr(record, field) is not None:
        return record
    record = record.model_copy(update={field: value})
    write_record(record, point_dir(results_dir, record.spec) / RESULT_FILE)
    return record
