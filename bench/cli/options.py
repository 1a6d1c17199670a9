"""Options more than one command takes, defined once (commands never import each other)."""

from __future__ import annotations

import argparse
import os

# Where `store add` and `history` keep and find the store by default (FSDP_BENCH_STORE names another:
# a path or a postgresql:// URL, bench/analysis/store/location.py).
DEFAULT_STORE = "results/fsdp-bench.sqlite"
STORE_ENV = "FSDP_BENCH_STORE"
# What --store's help says of its default (never the value: FSDP_BENCH_STORE may hold a password).
STORE_DEFAULT_HELP = f"${STORE_ENV}, else {DEFAULT_STORE}"


def default_store() -> str:
    """The store a command uses when --store names none."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


def add_numerics_arguments(parser: argparse.ArgumentParser) -> None:
    """`--no-numerics` and `--loss-rtol`: the numerics guard's options (check and history)."""
    from bench.analysis.check.numerics import LOSS_RTOL

    parser.add_argument(
        "--no-numerics",
        action="store_true",
        help="skip the numerics guard (each run's loss curve against its baseline's: exact on CPU with an "
        "identical software stack, within --loss-rtol otherwise; NaN/inf fails)",
    )
    parser.add_argument(
        "--loss-rtol",
        type=float,
        default=LOSS_RTOL,
        metavar="R",
        help=f"the numerics guard's relative tolerance where exact equality is not expected (default {LOSS_RTOL:g})",
    )


def numerics_problem(args: argparse.Namespace) -> str | None:
    """The one-line complaint about the numerics options (None when they are fine)."""
    if not 0.0 <= args.loss_rtol < 1.0:
        return f"--loss-rtol: must be >= 0 and < 1, got {args.loss_rtol:g}"
    return None


def add_overrides(parser: argparse.ArgumentParser, help: str, *, inspect: bool = True) -> None:
    """The overrides of a command that composes configs, completed by the shell (bench/cli/completion.py),
    with the registry in its `--help` and, with `inspect`, `--cfg job [--point N]` and `--info`."""
    from bench.cli.completion import complete_override

    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the registry's lines as written
    parser.lists_configs = True  # its --help lists the registry (bench/cli/main.py `Help`)
    action = parser.add_argument("overrides", nargs="*", help=help)
    action.completer = complete_override  # argcomplete's hook for a positional's values
    if not inspect:
        return
    parser.add_argument(
        "--cfg",
        "-c",
        metavar="job",
        help="print the composed config of the first point (or --point N) as resolved YAML, and exit: nothing runs",
    )
    parser.add_argument(
        "--point", type=int, metavar="N", help="with --cfg: the grid's N-th point (0-based) instead of the first"
    )
    parser.add_argument(
        "--info",
        action="store_true",
        help="print the config search path, each group's chosen option and its file, and the grid, and exit",
    )


def inspected(args: argparse.Namespace, overrides: list[str] | None = None, *, grid: bool = True) -> int | None:
    """`--cfg job` / `--info` of `overrides` (default: the command line's), printed, exit 0; None
    when neither was asked (the command goes on). A command of one point (`grid=False`: run,
    preflight) refuses a grid here as it refuses it when it runs."""
    if getattr(args, "cfg", None) is None and not getattr(args, "info", False):
        if getattr(args, "point", None) is not None:
            from bench.config.problems import ConfigError

            raise ConfigError(["--point: chooses the point --cfg job prints; give --cfg job with it"])
        return None
    from bench.config.compose import expand_grid, refuse_grid
    from reports.config_view import check_kind, config_lines, info_lines

    if args.cfg is not None:
        check_kind(args.cfg)  # before anything is composed
    overrides = args.overrides if overrides is None else overrides
    if not grid:
        refuse_grid(overrides)
    points = expand_grid(overrides) if grid else [overrides]
    lines = info_lines(points) if args.info else []
    if args.cfg is not None:
        lines += config_lines(points, args.cfg, args.point)
    print("\n".join(lines))
    return 0
