"""Benchmark: `fsdp-bench report` over 10,000 result records (budget: 6 s wall, 2 cores).

Writes a synthetic but schema-valid sweep (GRID: 5 models x 5 strategies x 4 precisions x
5 node counts x 4 micro-batches x 5 repeats, one point in ten OOM) as result.json files into a
temporary folder (not timed), then times the real command line, `fsdp-bench report DIR -o OUT`,
end to end: interpreter start, reading the records, aggregation with bootstrap intervals, six
plots, the HTML page, summary.md and results.csv.

Two benchmarks (benchmarks/measuring.py SCRIPTS): `report_10k` times the report of a folder never
reported (`--no-cache`): every record read and validated. `report_10k_warm` (`--warm`) times the report
of a folder reported before, as a folder is reported again and again while its sweep runs and after
it: the rows of one untimed report are kept (in a cache folder of the benchmark's own,
bench/analysis/report/digest_cache.py), and every record is still listed and its file statted.

    .venv/bin/python benchmarks/bench_report.py            # 10,000 records, 3 timed runs
    .venv/bin/python benchmarks/bench_report.py --warm     # the same, reported once before
    .venv/bin/python benchmarks/bench_report.py --records 2000 --runs 1

Prints each run's wall time, its CPU time (user + system, the command and its worker processes:
less sensitive than wall time to other work on a shared machine) and the medians; with
`--prepare DIR`, writes the records under DIR and prints the command for the harness to time
(benchmarks/timing.py).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from nightly import write_plain
from timing import Prepared, add_prepare, run_benchmark

from bench.analysis.check.synthetic import make_record, step_times
from bench.config.compose import flavors
from bench.config.paths import CACHE_DIR_VARIABLE
from bench.schema.record import PeakMemory, RunResult

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
PARAMS = {name: args.params for name, args in flavors().items()}


def synthetic_record(values: dict, rng: random.Random) -> RunResult:
    """A valid record whose throughput scales sub-linearly with the nodes, with noise.

    Built by bench.analysis.check.synthetic.make_record (the check's synthetic records), on an H100
    cluster preset, with a peak memory and hosts added so every plot and header line has data.
    """
    spec = {"sweep.name": "bench_report", "cluster": "p5.48xlarge", "gpus_per_node": 8,
            "seq_len": 2048, "steps": STEPS + 2, "warmup_steps": 2, **values}  # fmt: skip
    env = {"torch": "2.13.0", "cuda": "12.8", "nccl": "2.27.3", "device_name": "NVIDIA H100 80GB HBM3",
           "hostnames": [f"node-{i}" for i in range(values["nodes"])]}  # fmt: skip
    if rng.random() < FAILURE_RATE:
        record = make_record([], spec=spec, status="oom", env=env)
        return record.model_copy(update={"error": "CUDA out of memory. Tried to allocate 2.00 GiB"})
    params = PARAMS[values["model"]]
    world = 8 * values["nodes"]
    # Per-device tokens/s falls with model size; ~7 % is lost per doubling of the nodes.
    per_device = 4e10 / params * values["micro_batch"] ** 0.3 * 0.93 ** (values["nodes"].bit_length() - 1)
    step = world * values["micro_batch"] * 2048 / (per_device * world)
    record = make_record(step_times(step, 0.02, STEPS, seed=rng.randrange(2**31)), spec=spec, env=env,
                         mfu=rng.uniform(0.3, 0.5))  # fmt: skip
    peak = int(params * 16 / world + 2**30 * values["micro_batch"])
    record.metrics.tokens_per_s_per_device = record.metrics.tokens_per_s / world
    record.metrics.peak_mem_bytes = PeakMemory(max=peak, per_rank=[peak] * 8)
    return record


def write_records(root: Path, count: int, seed: int = 0) -> int:
    """`count` records of GRID under `root` (the first `count` grid points); `seed` draws their noise
    and which points fail, so two seeds give two sweeps of the same grid (benchmarks/bench_check.py)."""
    rng = random.Random(seed)
    combos = itertools.islice(itertools.product(*GRID.values()), count)
    written = 0
    for combo in combos:
        record = synthetic_record(dict(zip(GRID, combo, strict=True)), rng)
        write_plain(record, root / record.sweep / record.point_id / "result.json")
        written += 1
    return written


def synthetic_analysis(count: int):
    """The report's analysis of `count` records of GRID (written to a temporary folder and read back,
    as the report reads them): what the figure benchmark draws (bench_figures.py). Its
    imports are here: preparing and timing the report needs no pandas in this process."""
    from bench.analysis.records import load_records
    from bench.analysis.report.views import analyse

    with tempfile.TemporaryDirectory() as tmp:
        write_records(Path(tmp), count)
        records, _ = load_records(Path(tmp))
    return analyse(records)


def prepare(folder: Path, args: argparse.Namespace) -> Prepared:
    """The records under `folder`; the report of them, into a folder of each run's own, is what is timed:
    reading every record, or with `args.warm` after one untimed report kept their rows (under `folder`)."""
    written = write_records(folder / "results", args.records)
    argv = ["report", str(folder / "results"), "-o", str(folder / "report{run}")]
    env = {CACHE_DIR_VARIABLE: str(folder / "cache")}  # never the user's cache
    if args.warm:
        primed = [arg.replace("{run}", "-primed") for arg in argv]
        subprocess.run([sys.executable, "-m", "bench", *primed], env={**os.environ, **env}, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    else:
        argv.append("--no-cache")
    kept = "their rows kept by an untimed report" if args.warm else "every record read"
    return Prepared(argv, (0,), f"{written} records written to {folder / 'results'} ({kept})", env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm", action="store_true", help="a folder reported before: its rows kept by a report")
    add_prepare(parser)
    args = parser.parse_args(argv)
    run_benchmark("bench_report", prepare, args, f"{args.records} records{', warm' if args.warm else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
