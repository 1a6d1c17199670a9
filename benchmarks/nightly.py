"""Synthetic nightly results for the store and history benchmarks: SERIES configurations x NIGHTS runs.

Each night is one results folder (`ROOT/night-NN/nightly/<point_id>/result.json`), as a nightly job
leaves it: every configuration ran once, started at 02:00 UTC plus a few seconds per point. The
records are schema-valid and made by bench.analysis.check.synthetic.make_record (the check's synthetic
records) on an H100 cluster preset, with a 10-step loss curve (so history's numerics guard compares
every run with the one before it), hosts and a git sha per night. From night UPGRADE_NIGHT on, torch
is upgraded and one configuration in SLOWED_SHARE runs 15 % slower, so history has real change
points (with their environment change) to find, draw and list, as on a real store.

1,000 configurations (5 models x 5 strategies x 4 precisions x 5 node counts x 2 micro-batches)
x 10 nights = 10,000 records: the size of docs/results/store.md and docs/results/history.md.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from timing import add_prepare

from bench.analysis.check.synthetic import make_record, step_times
from bench.config.compose import flavors, load_grid
from bench.schema.record import PeakMemory, RunResult
from bench.schema.spec import RunSpec

# 5 x 5 x 4 x 5 x 2 = 1,000 configurations.
GRID = {
    "model": ["tinyllama-1.1b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b"],
    "strategy": ["full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard"],
    "precision": ["fp32", "bf16", "bf16_pure", "fp16"],
    "nodes": [1, 2, 4, 8, 16],
    "micro_batch": [1, 2],
}
SERIES, NIGHTS = 1000, 10
STEPS, SEQ_LEN, GPUS_PER_NODE = 10, 2048, 8
FIRST_NIGHT = datetime(2026, 5, 1, 2, 0, tzinfo=timezone.utc)
# The night torch is upgraded, and the share of configurations that get 15 % slower with it.
UPGRADE_NIGHT, SLOWED_SHARE, SLOWDOWN = 7, 0.05, 1.15
TORCH = ("2.12.0", "2.13.0")
# Run-to-run spread of a night's step times (each run's steps also vary by STEP_CV around it).
NIGHT_CV, STEP_CV = 0.01, 0.02
PARAMS = {name: args.params for name, args in flavors().items()}


def specs(count: int) -> list[RunSpec]:
    """The first `count` configurations of GRID, composed once as one grid (the nights reuse them)."""
    fixed = ["sweep.name=nightly", "cluster=p5.48xlarge", f"gpus_per_node={GPUS_PER_NODE}",
             f"train.seq_len={SEQ_LEN}", f"train.steps={STEPS + 2}", "train.warmup_steps=2"]  # fmt: skip
    axes = [
        f"{'train.' if key == 'micro_batch' else ''}{key}={','.join(map(str, values))}" for key, values in GRID.items()
    ]
    return [point.spec for point in load_grid([*fixed, *axes])][:count]


def night_record(spec: RunSpec, night: int, index: int, slowed: bool, rng: random.Random, root: Path) -> RunResult:
    """One configuration's run on one night: sub-linear scaling with the nodes, noise, a loss curve."""
    params = PARAMS[spec.model.name]
    per_device = 4e10 / params * spec.train.micro_batch**0.3 * 0.93 ** (spec.nodes.bit_length() - 1)
    step = spec.train.micro_batch * SEQ_LEN / per_device * rng.lognormvariate(0, NIGHT_CV)
    upgraded = night >= UPGRADE_NIGHT
    step *= SLOWDOWN if upgraded and slowed else 1.0
    started = FIRST_NIGHT + timedelta(days=night, seconds=3 * index)
    env = {"torch": TORCH[upgraded], "cuda": "12.8", "nccl": "2.27.3", "device_name": "NVIDIA H100 80GB HBM3",
           "hostnames": [f"node-{i}" for i in range(spec.nodes)], "git_sha": f"{night:02d}" * 20,
           "platform": "Linux-6.8-x86_64"}  # fmt: skip
    record = make_record(step_times(step, STEP_CV, STEPS, seed=rng.randrange(2**31)), spec=spec, env=env,
                         mfu=rng.uniform(0.3, 0.5))  # fmt: skip
    world = spec.world_size
    peak = int(params * 16 / world + 2**30 * spec.train.micro_batch)
    folder = root / f"night-{night:02d}" / record.sweep / record.point_id
    metrics = record.metrics.model_copy(
        update={
            "tokens_per_s_per_device": record.metrics.tokens_per_s / world,
            "peak_mem_bytes": PeakMemory(max=peak, per_rank=[peak] * GPUS_PER_NODE),
            "losses": [round(10.4 - 0.3 * s, 4) for s in range(STEPS)],
        }  # fmt: skip
    )
    return record.model_copy(
        update={
            "metrics": metrics,
            "started_at": started.isoformat(),
            "finished_at": (started + timedelta(seconds=2)).isoformat(),
            "log_dir": str(folder),
        }  # fmt: skip
    )


def write_plain(record: RunResult, path: Path) -> None:
    """result.json as bench.analysis.records.write_record lays it out (indented JSON), without its fsyncs:
    these folders are scratch, and 20,000 fsyncs would make writing them the benchmark's slowest part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.model_dump_json(indent=2))


def write_nights(root: Path, series: int = SERIES, nights: int = NIGHTS) -> int:
    """Write `nights` results folders of `series` configurations under `root`; returns the records written."""
    rng = random.Random(0)
    configurations = specs(series)
    slowed = [rng.random() < SLOWED_SHARE for _ in configurations]
    written = 0
    for night in range(nights):
        for index, spec in enumerate(configurations):
            record = night_record(spec, night, index, slowed[index], rng, root)
            write_plain(record, Path(record.log_dir) / "result.json")
            written += 1
    return written


def parse_args(
    description: str,
    argv: list[str] | None,
    nights: str,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The nightly benchmarks' shared options: the size of the nights (`nights`: what a night is to
    this benchmark) and the number of timed runs; `extra` adds a benchmark's own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--series", type=int, default=SERIES, help="configurations per night")
    parser.add_argument("--nights", type=int, default=NIGHTS, help=nights)
    parser.add_argument("--runs", type=int, default=3)
    add_prepare(parser)
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)
