"""`fsdp-bench sweep [OVERRIDES]`: a grid of points; exit 0 all ok, 1 some not ok, 2 invalid input.

With no experiment and no grid of your own, `experiment=cpu_smoke` is used. Comma-separated
overrides make a grid (`nodes=1,2,4 strategy=full_shard,hybrid_shard`) that is crossed with
the experiment's `sweep.grid`; the command line wins for keys given in both (bench/run/grid.py).
"""

from __future__ import annotations

import argparse

from bench.cli.options import add_overrides, inspected

HELP = "run a grid of points (default experiment=cpu_smoke), resuming where a previous run stopped"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_overrides(parser, "Hydra overrides; comma-separated values make a grid")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print every point run, what the ledger will do with it, its launch and the planner's prediction, "
        "after every check a real sweep makes; launch nothing, write nothing",
    )
    parser.add_argument("--json", action="store_true", help="with --dry-run: print a JSON list of plan objects")


def main(args: argparse.Namespace) -> int:
    from bench.config import toplevel
    from bench.config.problems import ConfigError
    from bench.run.grid import launchable_sweep, with_default_experiment
    from reports.progress import SweepProgress
    from reports.sweep import heading_lines, outcome_lines, ranked_lines, summary_lines, write_sweep_report

    if args.json and not args.dry_run:
        raise ConfigError(["--json: prints a dry run's points; give --dry-run with it"])
    if (done := inspected(args, with_default_experiment(args.overrides))) is not None:  # --cfg job / --info
        return done
    sweep = launchable_sweep(args.overrides)
    if args.dry_run:
        return dry_run(sweep, args.json)
    say(heading_lines(sweep))
    with SweepProgress(sweep.runs) as progress:
        outcome, refused = sweep.run(progress, on_ranked=lambda line, ranked: say(ranked_lines(line, ranked)))
    if refused is not None:
        return refused
    say(outcome_lines(outcome))
    if not outcome.interrupted and toplevel.wants_report(sweep.points[0].config) and outcome.records:
        print(f"report: {write_sweep_report(outcome.records, sweep.settings.results_dir, sweep.name, sweep.overrides)}")
    say(summary_lines(outcome, sweep.name))
    return 0 if outcome.all_ok else 1


def dry_run(sweep, as_json: bool) -> int:
    """`--dry-run`: what the sweep would do (reports/sweep.py); exit 0: it would start, 2: a lock it
    would not wait for (sweep.wait=false) is held now, as the sweep would be refused."""
    import sys

    from reports.sweep import dry_run_lines, dry_run_objects

    dry = sweep.dry_run()
    if as_json:
        from reports.plan_json import plan_json

        print(plan_json(dry_run_objects(dry)))
    else:
        say(dry_run_lines(sweep, dry))
    if dry.waits_for and not sweep.options.wait:
        for holder in dry.waits_for:
            print(f"error: {holder} (sweep.wait=false)", file=sys.stderr)
        return 2
    return 0


def say(lines: list[str]) -> None:
    for line in lines:
        print(line, flush=True)
