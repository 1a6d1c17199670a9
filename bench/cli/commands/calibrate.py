"""`fsdp-bench calibrate [-o FILE]`: measure this machine for the planner's `local-cpu` preset.

Measures matmul FLOP/s per dtype, a training step's achievable fraction of it, AdamW's
streaming rate and gloo collective bandwidth/latency on 2 real local ranks (see
bench/run/calibrate.py), then writes the JSON the planner reads for `cluster=local-cpu`
(default: bench.analysis.planner.calibration.calibration_path()). Takes about a minute.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "measure this machine (matmul FLOP/s, gloo bandwidth) for the planner's local-cpu preset"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="where to write (default: $FSDP_BENCH_CALIBRATION, else local-cpu.json in $FSDP_BENCH_CACHE_DIR, "
        "$XDG_CACHE_HOME/fsdp-bench or ~/.cache/fsdp-bench; with "
        "--from-preflight: required, the cluster file to write, e.g. my-configs/cluster/measured.yaml)",
    )
    parser.add_argument(
        "--from-preflight",
        metavar="RESULTS",
        help="write a cluster file with the links a preflight measured (keep it in your --config-dir)",
    )


def from_preflight(args: argparse.Namespace) -> int:
    """`calibrate --from-preflight RESULTS -o DIR/cluster/NAME.yaml`: a cluster file of the measured links."""
    from bench.analysis.preflight import read_preflight
    from bench.config.paths import input_problem, output_problem, require
    from bench.config.problems import ConfigError
    from reports.calibrate import write_cluster_file

    if args.output is None or args.output.suffix != ".yaml":
        raise ConfigError(
            ["--output: with --from-preflight give the cluster file to write, e.g. my-configs/cluster/ours.yaml"]
        )
    require(
        [input_problem("--from-preflight", args.from_preflight), output_problem("-o/--output", args.output, "file")]
    )
    try:
        record = read_preflight(Path(args.from_preflight))
    except ValueError as exc:
        raise ConfigError([f"--from-preflight: {exc}"]) from None
    if record.status != "ok":
        raise ConfigError([f"--from-preflight: the preflight did not measure anything ({record.status})"])
    print(write_cluster_file(record, args.output), end="")
    print(f"written: {args.output} (use it with --config-dir {args.output.parent.parent} cluster={args.output.stem})")
    return 0


def main(args: argparse.Namespace) -> int:
    from bench.analysis.planner.calibration import calibration_path, save_calibration
    from bench.config.paths import output_problem, read_only_error, require
    from reports.calibrate import calibration_lines

    if args.from_preflight:
        return from_preflight(args)
    from bench.run.calibrate import run_calibration

    path = args.output or calibration_path()
    require([output_problem("-o/--output", path, "file")])
    if fault := read_only_error(path):  # said now, not after a minute of measuring
        raise fault
    data = run_calibration(progress=lambda line: print(line, file=sys.stderr))
    save_calibration(data, path)
    print("\n".join(calibration_lines(data)))
    print(f"written: {path}")
    if args.output and args.output != calibration_path():
        print(f"the planner reads {calibration_path()}; set FSDP_BENCH_CALIBRATION={path} to use this file")
    return 0
