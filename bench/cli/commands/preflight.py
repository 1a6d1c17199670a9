"""`fsdp-bench preflight [OVERRIDES]`: measure the cluster on a point's world shape before trusting a sweep.

Same composition, launcher and worker as `fsdp-bench run`; instead of training, every rank times
matmuls at the model's GEMM shapes and its memory bandwidth, and the collectives on every process
group the strategy uses. Stores a versioned preflight record in the results folder
(`<results>/<sweep>/_preflight/<nodes>x<gpus_per_node>/preflight.json`) and prints a short table.
Exit 0 measured (stragglers or not: they are findings), 1 the preflight failed, 2 invalid input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import add_overrides, inspected

HELP = "measure the cluster on a point's world shape: matmul TFLOP/s, memory and collective bandwidth, stragglers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_overrides(parser, "Hydra overrides (the point whose world shape is measured)")


def main(args: argparse.Namespace) -> int:
    if (done := inspected(args, grid=False)) is not None:  # --cfg job / --info of its one point
        return done
    from bench.config.compose import preflight_settings
    from bench.run.point import launchable_point
    from bench.run.preflight import preflight_task
    from bench.schema.protocol import PREFLIGHT_RECORD
    from reports.preflight import table_lines

    # A preflight trains on no data: a token file's problems do not count. ConfigError: exit 2 (bench.cli.main).
    target = launchable_point(args.overrides, keep=lambda problem: not problem.startswith("train.data"))
    settings = preflight_settings(target.point.config, target.spec)
    spec, results_dir = target.spec, target.results_dir
    task = preflight_task(spec, settings, [spec.strategy], results_dir)
    alone, refused = target.preflight(task)
    if refused is not None:
        return refused
    if alone.record is None:  # launcher.apply=false: the job file is the product, nothing was measured
        print("rendered, nothing ran (launcher.apply=false): " + ", ".join(map(str, alone.rendered)))
        return 0
    record = alone.record
    print("\n".join(table_lines(record)))
    print(f"record: {Path(task.point_dir) / PREFLIGHT_RECORD}")
    return 0 if record.status == "ok" else 1
