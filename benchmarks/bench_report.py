"""Benchmark: `fsdp-bench report` over 10,000 result records (issue 4 target: under 10 s).

Writes a synthetic but schema-valid sweep (7 models... see GRID) as result.json files into a
temporary folder (not timed), then times the real command line, `fsdp-bench report DIR -o OUT`,
end to end: interpreter start, reading and validating every record, aggregation with
bootstrap intervals, six plots, the HTML page, summary.md and results.csv.

    .venv/bin/python benchmarks/bench_report.py            # 10,000 records, 3 timed runs
    .venv/bin/python benchmarks/bench_report.py --records 2000 --runs 1

Prints each run's wall time and the median.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.records import write_record
from bench.schemas import EnvInfo, Metrics, RunResult, RunSpec
from fsdp_core.flavors import FLAVORS

# 5 models x 5 strategies x 4 precisions x 5 node counts x 4 micro-batches x 5 repeats = 10,000.
GRID = {
    "model": ["tinyllama-1.1b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b"],
    "strategy": ["full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard"],
    "precision": ["fp32", "bf16", "bf16_pure", "fp16"],
    "nodes": [1, 2, 4, 8, 16],
    "micro_batch": [1, 2, 4, 8],
    "repeat": [0, 1, 2, 3, 4],
}
# One point in ten fails (OOM), as in a real sweep that probes the memory limit.
FAILURE_RATE = 0.1
STEPS = 10


def synthetic_record(values: dict, rng: random.Random) -> RunResult:
    """A valid record whose throughput scales sub-linearly with the nodes, with noise."""
    spec = RunSpec(
        sweep="bench_report",
        cluster="p5.48xlarge",
        device_type="cuda",
        gpus_per_node=8,
        seq_len=2048,
        steps=STEPS + 2,
        warmup_steps=2,
        **values,
    )
    info = FLAVORS[spec.model].info()
    if rng.random() < FAILURE_RATE:
        return RunResult(
            point_id=spec.point_id,
            sweep=spec.sweep,
            status="oom",
            spec=spec,
            model_info=info,
            error="CUDA out of memory. Tried to allocate 2.00 GiB",
        )
    per_device = 4e10 / info["params"] * spec.micro_batch**0.3 * rng.uniform(0.95, 1.05)
    tps = per_device * spec.world_size * 0.93 ** (spec.nodes.bit_length() - 1)  # ~7 % loss per doubling
    step = spec.tokens_per_step / tps
    times = [step * rng.uniform(0.97, 1.03) for _ in range(STEPS)]
    peak = int(info["params"] * 16 / spec.world_size + 2**30 * spec.micro_batch)
    metrics = Metrics(
        tokens_per_s=tps,
        tokens_per_s_per_device=tps / spec.world_size,
        step_times_s=times,
        step_time_s={
            "median": statistics.median(times),
            "mean": statistics.fmean(times),
            "p10": min(times),
            "p90": max(times),
            "cv": statistics.pstdev(times) / statistics.fmean(times),
        },
        mfu=rng.uniform(0.3, 0.5),
        peak_mem_bytes={"max": peak, "per_rank": [peak] * 8},
    )
    env = EnvInfo(
        torch="2.13.0",
        cuda="12.8",
        nccl="2.27.3",
        device_name="NVIDIA H100 80GB HBM3",
        hostnames=[f"node-{i}" for i in range(spec.nodes)],
    )
    return RunResult(
        point_id=spec.point_id,
        sweep=spec.sweep,
        status="ok",
        spec=spec,
        model_info=info,
        metrics=metrics,
        env=env,
        started_at="2025-01-01T00:00:00+00:00",
        finished_at="2025-01-01T00:05:00+00:00",
        wall_s=300.0,
    )


def write_records(root: Path, count: int) -> int:
    rng = random.Random(0)
    combos = itertools.islice(itertools.product(*GRID.values()), count)
    written = 0
    for combo in combos:
        record = synthetic_record(dict(zip(GRID, combo, strict=True)), rng)
        write_record(record, root / record.sweep / record.point_id / "result.json")
        written += 1
    return written


def time_report(results: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "bench", "report", str(results), "-o", str(out)], check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        written = write_records(results, args.records)
        print(f"bench_report: {written} records written to {results}")
        times = []
        for run in range(args.runs):
            times.append(time_report(results, Path(tmp) / f"report{run}"))
            print(f"bench_report: run {run + 1}: {times[-1]:.2f} s")
        size = (Path(tmp) / "report0" / "report.html").stat().st_size
        print(
            f"bench_report: {written} records, median {statistics.median(times):.2f} s over {len(times)} run(s); "
            f"report.html {size / 2**20:.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
