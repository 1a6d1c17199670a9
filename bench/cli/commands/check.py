"""`fsdp-bench check RESULTS --baseline B`: the regression check for CI.

Exit 0 pass, 1 regression, 2 nothing comparable or invalid input (docs/checks.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from bench.cli.options import add_numerics_arguments, numerics_problem

if TYPE_CHECKING:
    from bench.analysis.check.gate import CheckRequest

HELP = "compare results with a baseline: exact counters, noise-aware timings (exit 1 on a regression)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="results folder (or one result.json) to check")
    parser.add_argument(
        "--baseline", required=True, help="a baseline file (`fsdp-bench baseline save`) or a results folder"
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC:[+-]N%",
        help="per-metric threshold, e.g. tokens_per_s:-5%% or peak_mem_bytes:+0%% (repeatable; "
        "defaults: 5%% for timings, 0%% for counters)",
    )
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML here")
    parser.add_argument("--summary", metavar="FILE", help="also write a markdown summary here")
    parser.add_argument(
        "--allow-env-change",
        action="store_true",
        help="compare even when the environment fingerprint differs (and say so)",
    )
    parser.add_argument(
        "--no-gate-timings",
        action="store_true",
        help="print timing comparisons but gate only on deterministic counters",
    )
    parser.add_argument(
        "--all-rows", action="store_true", help="list unchanged counters too (by default only their count is printed)"
    )
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="significance level of the timing tests (default 0.05)"
    )
    add_numerics_arguments(parser)
    parser.add_argument(
        "--min-runs",
        type=int,
        default=2,
        metavar="N",
        help="runs (repeats) per side a timing needs to gate; below it the verdict is `insufficient` "
        "(default 2; 1 gates on a single run's per-step samples, which miss run-to-run noise)",
    )


def main(args: argparse.Namespace) -> int:
    from bench.analysis.check.gate import CheckRequest
    from bench.analysis.gc_pause import gc_paused
    from bench.analysis.store.location import parsed, records_problem
    from bench.config.paths import output_problem, require
    from bench.config.problems import ConfigError

    if not 0.0 < args.alpha < 1.0:
        raise ConfigError([f"--alpha: must be between 0 and 1, got {args.alpha}"])
    if args.min_runs < 1:
        raise ConfigError([f"--min-runs: must be an integer >= 1, got {args.min_runs}"])
    outputs = {"--junit": args.junit, "--summary": args.summary}
    require(
        [numerics_problem(args), records_problem("RESULTS", args.results), records_problem("--baseline", args.baseline)]
        + [output_problem(flag, path, "file") for flag, path in outputs.items() if path]
    )
    request = CheckRequest(
        parsed(args.results), parsed(args.baseline), args.threshold, allow_env_change=args.allow_env_change,
        gate_timings=not args.no_gate_timings, alpha=args.alpha, min_runs=args.min_runs,
        numerics=not args.no_numerics, loss_rtol=args.loss_rtol,
    )  # fmt: skip
    # Both sides' records and points stay alive until the check ends: no cyclic GC over them
    # (bench/analysis/gc_pause.py).
    with gc_paused():
        return _check(request, args)


def _check(request: CheckRequest, args: argparse.Namespace) -> int:
    """Run the check and print (and write) its outcome; the exit code."""
    from bench.analysis.check.gate import run_check
    from reports.check.outcome import check_lines, write_outputs

    outcome = run_check(request)
    for problem in outcome.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    for line in outcome.env.lines:
        print(line, file=sys.stderr if outcome.env.refused else sys.stdout)
    if outcome.report is None:
        return 2
    print("\n".join(check_lines(outcome, all_rows=args.all_rows)))
    write_outputs(outcome, junit=args.junit, summary=args.summary)
    return outcome.report.exit_code
