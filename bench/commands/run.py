"""`fsdp-bench run [OVERRIDES]`: one point, end to end; exit 0 ok, 1 the point failed, 2 invalid input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "run one benchmark point (Hydra overrides, e.g. model=tiny nodes=2 strategy=full_shard)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides on the sweeps/ config tree")


def main(args: argparse.Namespace) -> int:
    from bench.config import ConfigError, load_point
    from bench.console import point_summary
    from bench.execute import Interrupted, point_dir, run_group
    from bench.launch import get_launcher
    from bench.signals import sigterm_as_interrupt

    try:
        point = load_point(args.overrides)
        launcher = get_launcher(point.spec.launcher, point.config.get("launcher"))
        launcher.check_available(point.spec)
        results_dir = Path(point.config.get("results_dir") or "results")
        if problems := launcher.check_point(point.spec, results_dir):
            raise ConfigError(problems)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    rendered: list[Path] = []
    with sigterm_as_interrupt():
        try:
            records = run_group([point.spec], launcher, results_dir, on_rendered=rendered.extend)
        except Interrupted:
            print("interrupted: the point was recorded as interrupted", file=sys.stderr)
            return 1
    if rendered:
        print("rendered, nothing ran (launcher.apply=false): " + ", ".join(map(str, rendered)))
        return 0
    (record,) = records
    print(point_summary(record, str(point_dir(results_dir, point.spec) / "result.json")))
    return 0 if record.status == "ok" else 1
