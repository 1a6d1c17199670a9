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
    from bench.analysis.check.baseline import BaselineError, load_side, save_baseline

    try:
        side = load_side(args.results)
    except BaselineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for problem in side.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    if side.kind == "baseline":
        print(f"error: {args.results}: already a baseline file; give a results folder", file=sys.stderr)
        return 2
    ok = [p for p in side.points if p.status == "ok"]
    if not ok:
        print(f"error: {args.results}: no ok result records to save", file=sys.stderr)
        return 2
    for point in side.points:
        if point.status != "ok":
            print(f"warning: not saved ({point.status}): {point.label}", file=sys.stderr)
    save_baseline(side, args.output)
    runs = sum(p.runs for p in ok)
    print(f"saved {len(ok)} point(s) ({runs} run(s)) to {args.output}; environment: {side.env}")
    return 0
