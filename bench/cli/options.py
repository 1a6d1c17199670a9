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
