"""`fsdp-bench run [OVERRIDES]`: one point, end to end; exit 0 ok, 1 the point failed, 2 invalid input."""

from __future__ import annotations

import argparse

from bench.cli.options import add_overrides, inspected

HELP = "run one benchmark point (Hydra overrides, e.g. model=tiny nodes=2 strategy=full_shard)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_overrides(parser, "Hydra overrides on the sweeps/ config tree")


def main(args: argparse.Namespace) -> int:
    if (done := inspected(args, grid=False)) is not None:  # --cfg job / --info of its one point
        return done
    from bench.run.point import launchable_point
    from bench.schema.protocol import point_dir
    from reports.console import point_summary

    target = launchable_point(args.overrides)  # ConfigError: bench.cli.main says each line, exit 2
    spec, results_dir, rendered = target.spec, target.results_dir, []
    records, refused = target.launch([spec], "the point", on_rendered=rendered.extend)
    if refused is not None:
        return refused
    if rendered:
        print("rendered, nothing ran (launcher.apply=false): " + ", ".join(map(str, rendered)))
        return 0
    (record,) = records
    print(point_summary(record, str(point_dir(results_dir, spec) / "result.json")))
    return 0 if record.status == "ok" else 1
