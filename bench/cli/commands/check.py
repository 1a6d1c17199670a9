"""`fsdp-bench check RESULTS --baseline B`: the regression check for CI.

Exit 0 pass, 1 regression, 2 nothing comparable or invalid input (docs/checks.md).
"""

from __future__ import annotations

import argparse
import sys

from bench.cli.options import add_numerics_arguments, numerics_problem

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


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    from bench.analysis.check import fingerprint
    from bench.analysis.check.baseline import BaselineError, load_side
    from bench.analysis.check.compare import compare
    from bench.analysis.check.thresholds import ThresholdError, Thresholds
    from bench.present.check.table import hidden_line, report_rows, text_table, verdict_line

    if not 0.0 < args.alpha < 1.0:
        return _error(f"--alpha: must be between 0 and 1, got {args.alpha}")
    if args.min_runs < 1:
        return _error(f"--min-runs: must be an integer >= 1, got {args.min_runs}")
    if numerics_problem(args):
        return _error(numerics_problem(args))
    try:
        thresholds = Thresholds.parse(args.threshold)
        base, cur = load_side(args.baseline), load_side(args.results)
    except (ThresholdError, BaselineError) as exc:
        return _error(str(exc))
    for problem in base.problems + cur.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    gate_timings = not args.no_gate_timings
    env = fingerprint.decide(base.env, cur.env, allow_change=args.allow_env_change, gate_timings=gate_timings)
    for line in env.lines:
        print(line, file=sys.stderr if env.refused else sys.stdout)
    if env.refused:
        return 2
    report = compare(
        base.points, cur.points, thresholds, gate_timings=gate_timings, alpha=args.alpha, min_runs=args.min_runs,
        numerics=not args.no_numerics, loss_rtol=args.loss_rtol,
    )  # fmt: skip
    report.env_lines = env.lines
    print(f"baseline: {base.source}  current: {cur.source}")
    print(f"thresholds: {report.thresholds}" + ("" if gate_timings else " (timings not gating)"))
    rows = report_rows(report, compact=not args.all_rows)
    if rows:
        print(text_table(rows))
    if not args.all_rows and hidden_line(report):
        print(hidden_line(report))
    for hint in report.hints:
        print(f"insufficient: {hint}")
    for label in report.only_in_baseline:
        print(f"not in current results: {label}")
    for label in report.only_in_current:
        print(f"no baseline for: {label}")
    print(verdict_line(report))
    _write_outputs(args, report, base.source, cur.source)
    return report.exit_code


def _write_outputs(args: argparse.Namespace, report, baseline: str, current: str) -> None:
    from bench.present.check.junit import write_junit
    from bench.present.check.summary import write_summary

    if args.junit:
        write_junit(report, args.junit)
    if args.summary:
        write_summary(report, args.summary, baseline=baseline, current=current)
