"""`fsdp-bench ab --a CMD_A --b CMD_B [OVERRIDES] --rounds K`: A/B of two environments on one machine.

Exit 0 when every run succeeded, 1 when some run failed (the rest is still reported), 2 on
invalid input.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

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
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (a comma makes a grid: every point runs)")


def main(args: argparse.Namespace) -> int:
    from bench.analysis.check import abtest
    from bench.config.compose import load_grid
    from bench.config.problems import ConfigError
    from bench.present.check import ab as ab_output
    from bench.present.check.table import text_table
    from bench.run import ab as ab_run

    if args.rounds < 1:
        print(f"error: --rounds: must be at least 1, got {args.rounds}", file=sys.stderr)
        return 2
    try:
        commands = {"A": ab_run.build_command(args.a), "B": ab_run.build_command(args.b)}
        sides = {"A": shlex.split(args.a_overrides), "B": shlex.split(args.b_overrides)}
        points = [list(p.overrides) for p in load_grid(args.overrides)]
        for side, extra in sides.items():
            _check_side(points, extra, side)
    except ValueError as exc:  # shlex's "No closing quotation" is a ValueError; so is ConfigError
        lines = exc.lines if isinstance(exc, ConfigError) else [f"--a/--b: {exc}"]
        for line in lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    out = Path(args.out)
    for side, argv in commands.items():
        print(f"{side}: {' '.join(argv)}")
    try:
        outcomes = ab_run.run_rounds(commands, points, args.rounds, out, timeout_s=args.timeout, side_overrides=sides)
    except FileNotFoundError as exc:
        print(f"error: --a/--b: command not found: {exc.filename}", file=sys.stderr)
        return 2
    a_points, b_points, envs = abtest.load_sides(out)
    rows = abtest.summarize(a_points, b_points)
    for side, env in envs.items():
        print(f"{side} environment: {env}")
    if rows:
        print(text_table(ab_output.ab_table(rows), ab_output.AB_HEADERS))
    print(f"summary: {ab_output.write_summary(out, rows, envs, commands, outcomes, sides)}")
    failed = [o for o in outcomes if o.returncode != 0]
    if failed or not rows:
        print(f"{len(failed)} of {len(outcomes)} run(s) failed; logs under {out / 'logs'}", file=sys.stderr)
        return 1
    return 0


def _check_side(points: list[list[str]], extra: list[str], side: str) -> None:
    """A side's own overrides must be valid and keep every point's id: otherwise the two sides
    would measure different points and nothing would match (ConfigError, exit 2)."""
    from bench.config.compose import load_point
    from bench.config.problems import ConfigError

    if not extra:
        return
    flag = f"--{side.lower()}-overrides"
    for overrides in points:
        try:
            both, alone = load_point([*overrides, *extra]).spec, load_point(overrides).spec
        except ConfigError as exc:
            raise ConfigError([f"{flag}: {line}" for line in exc.lines]) from None
        if both.point_id != alone.point_id:
            raise ConfigError(
                [
                    f"{flag}: {' '.join(extra)} changes what the point measures (its id); give such a setting to "
                    "both sides as an override, or compare two sweeps with `fsdp-bench check`"
                ]
            )
