"""`fsdp-bench sweep [OVERRIDES]`: a grid of points; exit 0 all ok, 1 some not ok, 2 invalid input.

With no experiment and no grid of your own, `experiment=cpu_smoke` is used. Comma-separated
overrides make a grid (`nodes=1,2,4 strategy=full_shard,hybrid_shard`) that is crossed with
the experiment's `sweep.grid`; the command line wins for keys given in both.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

HELP = "run a grid of points (default experiment=cpu_smoke), resuming where a previous run stopped"
DEFAULT_EXPERIMENT = "cpu_smoke"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides; comma-separated values make a grid")


def with_default_experiment(overrides: list[str]) -> list[str]:
    from bench.config.compose import is_grid_override

    if any(o.startswith(("experiment=", "sweep.autotune=")) for o in overrides) or any(
        is_grid_override(o) for o in overrides
    ):
        return overrides
    return [f"experiment={DEFAULT_EXPERIMENT}", *overrides]


def main(args: argparse.Namespace) -> int:
    from bench.config.compose import load_grid
    from bench.config.problems import ConfigError
    from bench.run.autotune import autotune_count, choose
    from bench.run.launch import get_launcher

    overrides = with_default_experiment(list(args.overrides))
    autotuned = None
    try:
        if autotune_count(overrides):
            autotuned = choose(overrides, autotune_count(overrides))
            points = autotuned.points
        else:
            points = load_grid(overrides)
        check_sweep_settings(points[0].config["sweep"])
        launcher = get_launcher(points[0].spec.launcher, points[0].config.get("launcher"))
        for spec in {p.spec.launcher: p.spec for p in points}.values():
            launcher.check_available(spec)
        results_dir = Path(points[0].config.get("results_dir") or "results")
        problems = [
            f"[{' '.join(p.overrides)}] {line}" for p in points for line in launcher.check_point(p.spec, results_dir)
        ]
        if problems:
            raise ConfigError(problems)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    if len({p.spec.launcher for p in points}) > 1:
        print("error: launcher: one sweep uses one launcher; split the grid", file=sys.stderr)
        return 2
    return _run(points, launcher, overrides, autotuned)


def check_sweep_settings(sweep: dict) -> None:
    """The sweep.* knobs that are not part of a point's spec (bench.schema.options.SweepOptions)."""
    from bench.config.compose import sweep_options

    sweep_options({"sweep": sweep})


def _run(points, launcher, overrides: list[str], autotuned=None) -> int:
    from bench.config.compose import preflight_settings, sweep_options
    from bench.config.problems import ConfigError
    from bench.present.progress import SweepProgress
    from bench.run.execute import Interrupted
    from bench.run.ownership.locks import LockBusy, MeasurementLocks, allow_concurrent
    from bench.run.ownership.signals import stop_signals_as_interrupt
    from bench.run.sweep import SweepSettings, run_sweep

    cfg = points[0].config
    options = sweep_options(cfg)
    try:
        preflight = preflight_settings(cfg, points[0].spec) if options.preflight else None
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    settings = SweepSettings(
        results_dir=Path(cfg.get("results_dir") or "results"),
        force=options.force,
        retry_failed=options.retry_failed,
        repeats=options.repeats,
        group_launches=options.group_launches,
        plan=options.plan,
        preflight=preflight,
        predictions=autotuned.predictions if autotuned else {},
    )
    sweep_name = points[0].spec.sweep.name
    if autotuned:
        from bench.present.plan import autotune_lines as describe

        print("\n".join(describe(autotuned)), flush=True)
    print(
        f"sweep {sweep_name}: {len(points)} point(s) x {settings.repeats} repeat(s) -> "
        f"{settings.results_dir / sweep_name}",
        flush=True,
    )
    locks = MeasurementLocks(
        settings.results_dir / sweep_name,
        launcher.runs_here(points[0].spec),
        options.wait,
        allow_concurrent(options.allow_concurrent),
        options.orphans,
    )
    try:
        with stop_signals_as_interrupt(), locks, SweepProgress(len(points) * max(1, settings.repeats)) as progress:
            if autotuned and preflight is not None:
                points, settings = _autotune_measured(overrides, autotuned, launcher, settings, locks)
            outcome = run_sweep(
                points, launcher, settings, progress=progress, conditions=locks.conditions, owner=locks.token
            )
    except LockBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Interrupted):
        print("interrupted before any point ran (waiting for a lock, or in the preflight)", file=sys.stderr)
        return 1
    for decision in outcome.skipped:
        print(f"  skipped {decision.spec.point_id}: {decision.reason}")
    if outcome.rendered:
        print(f"{len(outcome.rendered)} job file(s) rendered, nothing ran (launcher.apply=false):")
        for path in outcome.rendered:
            print(f"  {path}")
    from bench.present.console import sweep_overhead_line, sweep_table

    if outcome.records:
        print(sweep_table(outcome.records))
    if outcome.interrupted:
        print(f"interrupted: {len(outcome.ran)} point(s) recorded in this run; run the same command to continue")
        return 1
    if cfg.get("report", True) and outcome.records:
        _write_report(outcome.records, settings.results_dir, sweep_name, overrides)
    n_bad = sum(r.status != "ok" for r in outcome.records)
    print(f"sweep {sweep_name}: {len(outcome.records) - n_bad} ok, {n_bad} not ok, wall {outcome.wall_s:.1f} s")
    if line := sweep_overhead_line(outcome.records, outcome.ran, outcome.wall_s):
        print(line)
    return 0 if outcome.all_ok else 1


def _autotune_measured(overrides, autotuned, launcher, settings, locks):
    """sweep.autotune with sweep.preflight: measure the world shape, then rank again with what it measured."""
    from dataclasses import replace

    from bench.present.plan import autotune_lines as describe
    from bench.run.autotune import choose
    from bench.run.sweep import preflight_first

    spec = autotuned.points[0].spec
    strategies = autotuned.result.axes["strategy"]
    alone = preflight_first(spec, launcher, settings, strategies, locks.conditions, locks.token)
    shape = (spec.nodes, spec.gpus_per_node)
    if alone.record is None:
        print(f"preflight {shape[0]}x{shape[1]}: rendered, nothing measured; ranking with nominal links")
        return autotuned.points, settings
    record, summary = alone.record, alone.summary
    if record.status != "ok":
        print(f"preflight {shape[0]}x{shape[1]}: {record.status} ({record.error}); ranking with nominal links")
        return autotuned.points, replace(settings, measured={shape: summary})
    measured = choose(overrides, len(autotuned.points), preflight=record)
    print(f"preflight {shape[0]}x{shape[1]}: ok; ranked again with its measured links", flush=True)
    print("\n".join(describe(measured)), flush=True)
    return measured.points, replace(settings, predictions=measured.predictions, measured={shape: summary})


def _write_report(records, results_dir: Path, sweep_name: str, overrides: list[str]) -> None:
    from bench.analysis.preflight import load_preflights
    from bench.present.report.build import write_report
    from bench.schema.protocol import point_dir

    command = "fsdp-bench sweep " + " ".join(shlex.quote(o) for o in overrides)
    dirs = {(r.sweep, r.point_id): point_dir(results_dir, r.spec) for r in records}
    preflights, unreadable = load_preflights(results_dir / sweep_name)
    for path, reason in unreadable:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    path = write_report(
        records,
        results_dir / sweep_name / "report",
        reproduce=[command.strip()],
        point_dirs=dirs,
        preflights=preflights,
    )
    print(f"report: {path}")
