"""`fsdp-bench baseline save RESULTS -o FILE`: record a baseline (counters, per-step samples, environment)."""

from __future__ import annotations

import argparse
import sys

HELP = "save a results folder as a baseline file for `fsdp-bench check`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    save = actions.add_parser("save", help="write RESULTS' ok points to a baseline file")
    save.add_argument("results", help="results folder (or one result.json)")
    save.add_argument("-o", "--output", required=True, metavar="FILE", help="baseline file to write (JSON)")


def main(args: argparse.Namespace) -> int:
    from bench.analysis.gc_pause import gc_paused
    from bench.analysis.store.location import records_problem
    from bench.config.paths import output_problem, require

    require([records_problem("RESULTS", args.results), output_problem("-o/--output", args.output, "file")])
    with gc_paused():  # every record stays alive until the file is written (bench/analysis/gc_pause.py)
        return _save(args)


def _save(args: argparse.Namespace) -> int:
    """Load RESULTS, refuse what cannot be a baseline, write the file; the exit code."""
    from bench.analysis.check.baseline import BaselineError, baseline_draft, save_baseline
    from bench.config.problems import ConfigError

    try:
        draft = baseline_draft(args.results)
    except BaselineError as exc:
        raise ConfigError([str(exc)]) from None
    for problem in draft.side.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    if draft.refusal:
        raise ConfigError([draft.refusal])
    for point in draft.not_saved:
        print(f"warning: not saved ({point.status}): {point.label}", file=sys.stderr)
    save_baseline(draft.side, args.output)
    runs = sum(p.runs for p in draft.saved)
    print(f"saved {len(draft.saved)} point(s) ({runs} run(s)) to {args.output}; environment: {draft.side.env}")
    return 0
