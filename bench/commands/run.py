"""`fsdp-bench run [OVERRIDES]`: one point, end to end; exit 0 ok, 1 the point failed, 2 invalid input."""

from __future__ import annotations

import argparse
import sys

HELP = "run one benchmark point (Hydra overrides, e.g. model=tiny nodes=2 strategy=full_shard)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides on the sweeps/ config tree")


def main(args: argparse.Namespace) -> int:
    from bench.commands.single_point import launchable_point
    from bench.config import ConfigError
    from bench.console import point_summary
    from bench.execute import Interrupted, point_dir, run_group
    from bench.locks import LockBusy
    from bench.signals import sigterm_as_interrupt

    try:
        target = launchable_point(args.overrides)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    spec, results_dir, rendered = target.spec, target.results_dir, []
    locks = target.locks()
    try:
        with sigterm_as_interrupt(), locks:
            records = run_group(
                [spec], target.launcher, results_dir, on_rendered=rendered.extend, conditions=locks.conditions
            )
    except LockBusy as exc:
        print(f"error: {exc} (sweep.wait=false)", file=sys.stderr)
        return 2
    except (Interrupted, KeyboardInterrupt):
        print("interrupted: the point was recorded as interrupted", file=sys.stderr)
        return 1
    if rendered:
        print("rendered, nothing ran (launcher.apply=false): " + ", ".join(map(str, rendered)))
        return 0
    (record,) = records
    print(point_summary(record, str(point_dir(results_dir, spec) / "result.json")))
    return 0 if record.status == "ok" else 1
