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


def main(args: argparse.Namespace) -> int:
    from bench.config import toplevel
    from bench.run.grid import launchable_sweep, with_default_experiment
    from reports.progress import SweepProgress
    from reports.sweep import heading_lines, outcome_lines, ranked_lines, summary_lines, write_sweep_report

    if (done := inspected(args, with_default_experiment(args.overrides))) is not None:  # --cfg job / --info
        return done
    sweep = launchable_sweep(args.overrides)
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


def say(lines: list[str]) -> None:
    for line in lines:
        print(line, flush=True)
