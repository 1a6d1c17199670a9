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
        help="where to write (default: $FSDP_BENCH_CALIBRATION or ~/.cache/fsdp-bench/local-cpu.json; with "
        "--from-preflight: required, the cluster file to write, e.g. my-configs/cluster/measured.yaml)",
    )
    parser.add_argument(
        "--from-preflight",
        metavar="RESULTS",
        help="write a cluster file with the links a preflight measured (keep it in your --config-dir)",
    )


def summary(data: dict) -> list[str]:
    """Human-readable lines of what was measured."""
    lines = []
    for dtype, by_threads in data["matmul_gflops"].items():
        cells = ", ".join(f"{t} thread(s) {v:.1f}" for t, v in by_threads.items())
        lines.append(f"matmul {dtype}: {cells} GFLOP/s")
    step = data["model_step"]
    cells = ", ".join(f"{p['processes']}x{p['threads']}: {p['gflops_per_process']:.1f}" for p in step["patterns"])
    lines.append(f"training step ({step['model']}, fp32), processes x threads at once: {cells} GFLOP/s per process")
    lines.append(f"AdamW streaming: {data['optimizer_gbps']:.2f} GB/s")
    busy = data.get("collectives_busy", {})
    for kind, fit in data["collectives"].items():
        line = f"gloo {kind}: {fit['gbps']:.2f} Gb/s, latency {1e6 * fit['latency_s']:.0f} us per ring step"
        if kind in busy:
            line += f" (cores busy: {busy[kind]['gbps']:.2f} Gb/s, {1e6 * busy[kind]['latency_s']:.0f} us)"
        lines.append(line)
    lines.append(f"host memory: {data['memory_gib']:.1f} GiB shared by all local ranks")
    return lines


def from_preflight(args: argparse.Namespace) -> int:
    """`calibrate --from-preflight RESULTS -o DIR/cluster/NAME.yaml`: a cluster file of the measured links."""
    from bench.analysis.planner.from_preflight import cluster_yaml
    from bench.analysis.preflight import read_preflight
    from bench.schema.files import write_text_atomic

    if args.output is None or args.output.suffix != ".yaml":
        print("error: --output: with --from-preflight give the cluster file to write, e.g. my-configs/cluster/ours.yaml",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        record = read_preflight(Path(args.from_preflight))
    except ValueError as exc:
        print(f"error: --from-preflight: {exc}", file=sys.stderr)
        return 2
    if record.status != "ok":
        print(f"error: --from-preflight: the preflight did not measure anything ({record.status})", file=sys.stderr)
        return 2
    write_text_atomic(args.output, cluster_yaml(record, args.output.stem))
    print(args.output.read_text(), end="")
    print(f"written: {args.output} (use it with --config-dir {args.output.parent.parent} cluster={args.output.stem})")
    return 0


def main(args: argparse.Namespace) -> int:
    from bench.analysis.planner.calibration import calibration_path

    if args.from_preflight:
        return from_preflight(args)
    from bench.run.calibrate import run_calibration
    from bench.schema.files import write_json_atomic

    path = args.output or calibration_path()
    if path.exists() and path.is_dir():
        print(f"error: --output: {path} is a directory; give a file path", file=sys.stderr)
        return 2
    data = run_calibration(progress=lambda line: print(line, file=sys.stderr))
    write_json_atomic(path, data)
    for line in summary(data):
        print(line)
    print(f"written: {path}")
    if args.output and args.output != calibration_path():
        print(f"the planner reads {calibration_path()}; set FSDP_BENCH_CALIBRATION={path} to use this file")
    return 0
