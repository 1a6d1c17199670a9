"""`fsdp-bench plan [OVERRIDES] [--json]`: predicted memory, fit, step time and scaling per point.

No GPU and no torch: the planner (bench/planner) works from the model's shapes, the cluster
preset and its calibration. Exit 0, or 2 on invalid input.
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "predict memory, fit, throughput and scaling efficiency per point, without running it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides; comma-separated values make a grid")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per point")
    parser.add_argument(
        "--preflight",
        metavar="RESULTS",
        help="plan with the links and rates a preflight measured (a preflight.json, or a folder holding one)",
    )


def main(args: argparse.Namespace) -> int:
    from bench.config import ConfigError, load_grid
    from bench.planner import predict, with_scaling_efficiency
    from bench.planner.from_preflight import compatibility_problem
    from bench.preflight import read_preflight

    try:
        points = load_grid(args.overrides)
        preflight = read_preflight(args.preflight) if args.preflight else None
        if preflight is not None:
            problems = {p for point in points if (p := compatibility_problem(point.spec, preflight))}
            if problems:
                raise ConfigError(sorted(problems))
        predictions = with_scaling_efficiency([predict(point.spec, preflight) for point in points])
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except ValueError as exc:  # the planner's own refusals (unknown device, missing peak)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(predictions, indent=2))
    else:
        from bench.planner.render import print_plan

        print_plan(predictions)
    return 0
