#!/usr/bin/env python
"""Validate `fsdp-bench preflight` on this machine, with real processes.

crosscheck: two gloo ranks time each collective at each size twice per round, once with the
    preflight's own code (fsdp_core.preflight) and once with an independent plain
    `torch.distributed` loop (barrier, perf_counter, the collective, the slowest rank by an
    all-reduce MAX), interleaved round by round so both see the same machine. Prints the median
    times and their ratio per collective and size.
flags: runs `fsdp-bench preflight` N times quiet and N times with `debug.slow_rank=1` on each
    shape, and counts the runs that named anyone (quiet: false flags) or named rank 1 (slow:
    detections). Prints each run's findings and the host load around it.

    .venv/bin/python scripts/validate_preflight.py crosscheck --rounds 7
    .venv/bin/python scripts/validate_preflight.py flags --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run.launch.ports import free_port  # noqa: E402 - after the repository joins the path

MIB = 2**20
SHAPES = {"2x1": ["nodes=2", "gpus_per_node=1"], "2x2": ["nodes=2", "gpus_per_node=2", "strategy=hybrid_shard"]}


def _crosscheck_rank(rank: int, world: int, port: int, sizes: list[int], rounds: int, iters: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    from fsdp_core.preflight import time_group

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    group = dist.group.WORLD
    harness: dict = {}
    plain: dict = {}
    for _ in range(rounds):
        for op in ("all_gather", "reduce_scatter", "all_reduce"):
            settings = {"collectives": [op], "iters": iters}
            for sample in time_group("world", group, None, settings, sizes, torch.float32, torch.float32,
                                      torch.device("cpu"), (1, -1)):  # fmt: skip
                slowest = torch.tensor(sample["seconds"], dtype=torch.float64)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                harness.setdefault((op, sample["bytes"]), []).extend(slowest.tolist())
            for size in sizes:
                plain.setdefault((op, size), []).extend(_plain_loop(op, size, world, iters))
    if rank == 0:
        rows = [
            {"op": op, "bytes": size, "harness_s": statistics.median(harness[(op, size)]),
             "plain_s": statistics.median(plain[(op, size)])}
            for (op, size) in sorted(plain)
        ]  # fmt: skip
        Path(out).write_text(json.dumps(rows))
    dist.destroy_process_group()


def _plain_loop(op: str, size: int, world: int, iters: int) -> list[float]:
    """The textbook timing loop, written apart from the harness: the slowest rank per repetition."""
    import torch
    import torch.distributed as dist

    numel = size // 4
    if op == "all_gather":
        inp, outp = torch.zeros(numel // world), torch.empty(numel)
        call = lambda: dist.all_gather_into_tensor(outp, inp)  # noqa: E731
    elif op == "reduce_scatter":
        inp, outp = torch.ones(numel), torch.empty(numel // world)
        call = lambda: dist.reduce_scatter_tensor(outp, inp)  # noqa: E731
    else:
        buf = torch.ones(numel)
        call = lambda: dist.all_reduce(buf)  # noqa: E731
    call()
    times = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


def crosscheck(args: argparse.Namespace) -> None:
    import torch.multiprocessing as mp

    sizes = [2**k * 1024 for k in range(0, 15)]  # 1 KiB .. 16 MiB
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        mp.spawn(_crosscheck_rank, args=(2, free_port(), sizes, args.rounds, args.iters, out), nprocs=2)
        rows = json.loads(Path(out).read_text())
    print(f"2 gloo ranks, {args.rounds} interleaved rounds x {args.iters} repetitions; load {os.getloadavg()[0]:.1f}")
    print("| collective | bytes | preflight median (ms) | plain loop median (ms) | preflight / plain |")
    print("|---|---:|---:|---:|---:|")
    worst = 0.0
    for r in rows:
        ratio = r["harness_s"] / r["plain_s"]
        if r["bytes"] >= MIB:
            worst = max(worst, abs(ratio - 1))
        print(f"| {r['op']} | {r['bytes']:,} | {r['harness_s'] * 1e3:.3f} | {r['plain_s'] * 1e3:.3f} | {ratio:.3f} |")
    print(f"largest disagreement at >= 1 MiB: {100 * worst:.1f}%")


def flags(args: argparse.Namespace) -> None:
    from bench.analysis.preflight import read_preflight

    results = Path(tempfile.mkdtemp(prefix="validate_preflight_"))
    counts: dict[tuple[str, str], list[int]] = {}
    for run in range(args.runs):
        for shape, overrides in SHAPES.items():
            for kind, extra in (("quiet", []), ("slow", ["debug.slow_rank=1"])):
                out = results / f"{shape}_{kind}_{run}"
                argv = [sys.executable, "-m", "bench", "preflight", f"model={args.model}", *overrides, *extra,
                        f"preflight.max_bytes={args.max_bytes}", f"results_dir={out}"]  # fmt: skip
                proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
                if proc.returncode != 0:
                    print(f"{shape} {kind} run {run}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
                    continue
                record = read_preflight(out / "adhoc" / "_preflight")
                named = [(s.measure, s.rank if s.rank is not None else f"node {s.node}") for s in record.stragglers]
                hit = bool(named) if kind == "quiet" else ("matmul", 1) in named
                counts.setdefault((shape, kind), []).append(int(hit))
                load = max((max(h.before, h.after) for h in record.host_load), default=float("nan"))
                print(f"{shape} {kind} run {run}: named {named or 'nobody'} (load {load:.1f})", flush=True)
    print("| shape | runs | quiet: runs naming anyone | slow_rank=1: runs naming rank 1 (matmul) |")
    print("|---|---:|---:|---:|")
    for shape in SHAPES:
        quiet, slow = counts.get((shape, "quiet"), []), counts.get((shape, "slow"), [])
        print(f"| {shape} | {len(quiet)} | {sum(quiet)} | {sum(slow)} of {len(slow)} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    check = sub.add_parser("crosscheck")
    check.add_argument("--rounds", type=int, default=7)
    check.add_argument("--iters", type=int, default=5)
    flag = sub.add_parser("flags")
    flag.add_argument("--runs", type=int, default=10)
    flag.add_argument("--model", default="tiny")
    flag.add_argument("--max-bytes", type=int, default=MIB)
    args = parser.parse_args(argv)
    crosscheck(args) if args.what == "crosscheck" else flags(args)


if __name__ == "__main__":
    main()
