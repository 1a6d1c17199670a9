"""`fsdp-bench ab --a CMD_A --b CMD_B [OVERRIDES] --rounds K`: A/B of two environments on one machine.

Exit 0 when every run succeeded, 1 when some run failed (the rest is still reported), 2 on
invalid input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import add_overrides

HELP = "run the same points under two environments (commands), alternating, and report B/A of tokens/s with a CI"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--a",
        default="",
        metavar="CMD_A",
        help="side A: the fsdp-bench command of that environment (e.g. '../venv-a/bin/fsdp-bench') "
        "or an environment prefix ('env FOO=1'); default: this fsdp-bench",
    )
    parser.add_argument("--b", default="", metavar="CMD_B", help="side B, as --a")
    parser.add_argument(
        "--a-overrides",
        default="",
        metavar="OVERRIDES",
        help="overrides for side A only, e.g. 'telemetry.enabled=false' (a setting that leaves the point id as it "
        "is, so both sides' points still match)",
    )
    parser.add_argument(
        "--b-overrides", default="", metavar="OVERRIDES", help="overrides for side B only, as --a-overrides"
    )
    parser.add_argument("--rounds", type=int, default=4, help="rounds; each runs every point on both sides (default 4)")
    parser.add_argument("-o", "--out", default="results/ab", help="output folder (default results/ab)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take (default 900)")
    add_overrides(parser, "Hydra overrides (a comma makes a grid: every point runs)", inspect=False)


def main(args: argparse.Namespace) -> int:
    from bench.config.paths import output_problem, require
    from bench.config.problems import ConfigError
    from bench.run.ab import plan_ab, run_ab
    from reports.check import ab as ab_output
    from reports.check.table import text_table

    if args.rounds < 1:
        raise ConfigError([f"--rounds: must be at least 1, got {args.rounds}"])
    require([output_problem("-o/--out", args.out, "folder")])
    plan = plan_ab(args.a, args.b, args.a_overrides, args.b_overrides, args.overrides)
    out = Path(args.out)
    for side, argv in plan.commands.items():
        print(f"{side}: {' '.join(argv)}")
    result = run_ab(plan, args.rounds, out, timeout_s=args.timeout)
    for side, env in result.envs.items():
        print(f"{side} environment: {env}")
    if result.rows:
        print(text_table(ab_output.ab_table(result.rows), ab_output.AB_HEADERS))
    summary = ab_output.write_summary(
        out, result.rows, result.envs, plan.commands, result.outcomes, plan.side_overrides
    )
    print(f"summary: {summary}")
    if result.failed or not result.rows:
        print(
            f"{len(result.failed)} of {len(result.outcomes)} run(s) failed; logs under {out / 'logs'}", file=sys.stderr
        )
        return 1
    return 0
