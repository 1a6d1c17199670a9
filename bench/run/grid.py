"""A sweep's grid composed and checked before anything launches, then run under the locks its
measurement holds: what `fsdp-bench sweep` does.

With no experiment and no grid of the user's own, `experiment=cpu_smoke` is used. `sweep.autotune=K`
makes the points the planner's K best configurations (bench/run/autotune.py); with
`sweep.preflight=true` too, the world shape is measured first and the configurations ranked again
with what it measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.config import toplevel
from bench.config.compose import is_grid_override, load_grid, preflight_settings, sweep_options
from bench.config.problems import ConfigError
from bench.run.autotune import Autotuned, autotune_count, choose
from bench.run.launch import Launcher, get_launcher
from bench.run.point import measurement_locks, run_locked
from bench.run.sweep import Progress, SweepOutcome, SweepSettings, preflight_first, run_sweep

DEFAULT_EXPERIMENT = "cpu_smoke"
# What an autotuned sweep reports once its preflight decided the ranking: a line, and the new ranking
# (None: the nominal one stands).
OnRanked = Callable[[str, "Autotuned | None"], None]


def with_default_experiment(overrides: list[str]) -> list[str]:
    """The overrides, with `experiment=cpu_smoke` in front unless they name an experiment, autotune or
    make a grid of their own."""
    if any(o.startswith(("experiment=", "sweep.autotune=")) for o in overrides) or any(
        is_grid_override(o) for o in overrides
    ):
        return overrides
    return [f"experiment={DEFAULT_EXPERIMENT}", *overrides]


@dataclass
class LaunchableSweep:
    overrides: list[str]  # with the default experiment where it applies
    points: list[Any]  # bench.config.compose.Point
    launcher: Launcher
    options: Any  # bench.schema.options.SweepOptions
    settings: SweepSettings
    autotuned: Autotuned | None = None

    @property
    def name(self) -> str:
        return self.points[0].spec.sweep.name

    @property
    def folder(self) -> Path:
        return self.settings.results_dir / self.name

    @property
    def runs(self) -> int:
        """Point runs the sweep may make (every point, every repeat)."""
        return len(self.points) * max(1, self.settings.repeats)

    def run(self, progress: Progress, on_ranked: OnRanked) -> tuple[SweepOutcome | None, int | None]:
        """Every pending point run under the sweep's locks: (outcome, None), or (None, exit code) when
        a lock was refused (2) or the sweep was interrupted before any point ran (1)."""

        def sweep(locks) -> SweepOutcome:
            points, settings = self.points, self.settings
            if self.autotuned and settings.preflight is not None:
                points, settings = self._rank_measured(locks, on_ranked)
            return run_sweep(points, self.launcher, settings, progress=progress, conditions=locks.conditions,
                             owner=locks.token)  # fmt: skip

        locks = measurement_locks(self.folder, self.launcher.runs_here(self.points[0].spec), self.options)
        interrupted = "interrupted before any point ran (waiting for a lock, or in the preflight)"
        return run_locked(locks, sweep, interrupted, None)

    def dry_run(self) -> DryRun:
        """What `run` would do, decided as it decides, without a lock, a launch or a write: each
        point run's ledger decision, its launch (points grouped by world shape as the sweep groups
        them), its prediction (and whether `sweep.plan=true` skips it), and a lock held now."""
        from bench.run.ledger import Ledger
        from bench.run.ownership.locks import held_now
        from bench.run.sweep import expand_repeats, group_by_world_shape

        settings = self.settings
        specs = expand_repeats(self.points, settings.repeats)
        ledger = Ledger(settings.results_dir, self.name, settings.force, settings.retry_failed)
        decisions = [ledger.decide(spec) for spec in specs]
        predictions = self._predictions(specs)
        skipped = {
            d.spec.point_id for d in decisions if settings.plan and d.run and not predictions[d.spec.point_id]["fits"]
        }
        pending = [d.spec for d in decisions if d.run and d.spec.point_id not in skipped]
        launches = {
            spec.point_id: index
            for index, group in enumerate(group_by_world_shape(pending, settings.group_launches))
            for spec in group
        }
        runs = [
            PlannedRun(d, launches.get(d.spec.point_id), predictions[d.spec.point_id], d.spec.point_id in skipped)
            for d in decisions
        ]
        locks = measurement_locks(self.folder, self.launcher.runs_here(self.points[0].spec), self.options)
        return DryRun(runs, held_now(locks))

    def _predictions(self, specs: list) -> dict[str, dict]:
        """point_id -> plan object of every point run (an autotuned sweep's from its ranking, as the
        sweep records it)."""
        from bench.analysis.planner.skip import plan_points

        planned = plan_points(specs)
        for spec in specs:
            first = spec.model_copy(update={"repeat": 0}).point_id
            planned[spec.point_id] = self.settings.predictions.get(first, planned[spec.point_id])
        return planned

    def _rank_measured(self, locks, on_ranked: OnRanked) -> tuple[list, SweepSettings]:
        """sweep.autotune with sweep.preflight: measure the world shape, then rank again with what it measured."""
        spec, settings = self.autotuned.points[0].spec, self.settings
        strategies = self.autotuned.result.axes["strategy"]
        alone = preflight_first(spec, self.launcher, settings, strategies, locks.conditions, locks.token)
        shape = f"{spec.nodes}x{spec.gpus_per_node}"
        if alone.record is None:
            on_ranked(f"preflight {shape}: rendered, nothing measured; ranking with nominal links", None)
            return self.autotuned.points, settings
        record, measured_shape = alone.record, {(spec.nodes, spec.gpus_per_node): alone.summary}
        if record.status != "ok":
            on_ranked(f"preflight {shape}: {record.status} ({record.error}); ranking with nominal links", None)
            return self.autotuned.points, replace(settings, measured=measured_shape)
        measured = choose(self.overrides, len(self.autotuned.points), preflight=record)
        on_ranked(f"preflight {shape}: ok; ranked again with its measured links", measured)
        return measured.points, replace(settings, predictions=measured.predictions, measured=measured_shape)


@dataclass(frozen=True)
class PlannedRun:
    """One point run of a dry run: the ledger's decision, the launch it would run in (None: not
    run), its plan object, and whether `sweep.plan=true` skips it as predicted not to fit."""

    decision: Any  # bench.run.ledger.Decision
    launch: int | None
    prediction: dict[str, Any]
    planned_skip: bool


@dataclass(frozen=True)
class DryRun:
    runs: list[PlannedRun]
    waits_for: list[str]  # the locks another process holds now (the sweep would wait for them)


def launchable_sweep(overrides: list[str]) -> LaunchableSweep:
    """Compose and validate every point, check each against its launcher (ConfigError lists every
    problem, each point's prefixed with its overrides), before anything launches or is written."""
    from bench.config.paths import one_try_per_folder, output_problem

    overrides = with_default_experiment(list(overrides))
    autotuned = None
    if k := autotune_count(overrides):
        autotuned = choose(overrides, k)
        points = autotuned.points
    else:
        points = load_grid(overrides)
    cfg = points[0].config
    options = sweep_options(cfg)
    launcher = get_launcher(points[0].spec.launcher, cfg.get("launcher"))
    for spec in {p.spec.launcher: p.spec for p in points}.values():
        launcher.check_available(spec)
    results_dir = toplevel.results_dir(cfg)
    with one_try_per_folder():  # every point asks for the same folders: each is tried once
        if problem := output_problem("results_dir", results_dir, "folder"):  # one line for the whole grid
            raise ConfigError([problem])
        problems = [
            f"[{' '.join(p.overrides)}] {line}" for p in points for line in launcher.check_point(p.spec, results_dir)
        ]
    if problems:
        raise ConfigError(problems)
    if len({p.spec.launcher for p in points}) > 1:
        raise ConfigError(["launcher: one sweep uses one launcher; split the grid"])
    settings = SweepSettings(
        results_dir=results_dir,
        force=options.force,
        retry_failed=options.retry_failed,
        repeats=options.repeats,
        group_launches=options.group_launches,
        plan=options.plan,
        preflight=preflight_settings(cfg, points[0].spec) if options.preflight else None,
        predictions=autotuned.predictions if autotuned else {},
    )
    return LaunchableSweep(overrides, points, launcher, options, settings, autotuned)
