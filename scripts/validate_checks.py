#!/usr/bin/env python
"""Measure the false-alarm and detection rates of `fsdp-bench check` on this machine, with real runs.

One `debug` point (cpu_smoke's, narrowed to 1 rank, full_shard, fp32). Slowed runs use
`debug.slow_fraction` (every timed step sleeps that fraction of its own time: +10% for 0.1).
An exit code 1 of `fsdp-bench check` (run in-process: the CLI's own code) on an A/A pair is a
false alarm, on an A/B pair a detection. Two protocols:

interleaved (default): per comparison, one sweep `debug.slow_fraction=0,F sweep.repeats=2K`,
    whose runs alternate clean, slow, clean, slow, ... in one launch. A/A: the K odd clean
    repeats against the K even ones; A/B: the K odd slow repeats against the K even clean ones.
    Machine drift falls on both sides alike (the `fsdp-bench ab` protocol).
sequential: 2N+1 sweeps of K repeats each, clean, slow, clean, ..., clean; A/A compares
    consecutive clean sweeps, A/B a clean sweep with the slow one after it. This is a baseline
    recorded at one time checked against a run at another: it also measures the machine's drift.

    .venv/bin/python scripts/validate_checks.py --comparisons 20 --repeats 3 --timed-steps 100
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# The cpu_smoke experiment narrowed to one point (the command line wins over its grid): `debug`
# flavor, 1 rank, full_shard, fp32, seq_len 64, micro_batch 2.
POINT = ["experiment=cpu_smoke", "nodes=1", "strategy=full_shard", "precision=fp32"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", choices=("interleaved", "sequential"), default="interleaved")
    parser.add_argument("--comparisons", type=int, default=20, help="A/A pairs and A/B pairs, each (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="K: runs per side of a comparison (default 3)")
    parser.add_argument("--timed-steps", type=int, default=100, help="timed steps per run (default 100)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="warm-up steps per run (default 5)")
    # 1 thread: with 2 OpenMP threads on 2 cores, a neighbour busy on one core stalls every step.
    parser.add_argument("--threads-per-rank", type=int, default=1, help="train.threads_per_rank (default 1)")
    parser.add_argument("--slow-fraction", type=float, default=0.1, help="debug.slow_fraction of B (default 0.1)")
    parser.add_argument("--threshold", default="tokens_per_s:-5%", help="check threshold (default tokens_per_s:-5%%)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "validate_checks", help="output folder")
    return parser.parse_args(argv)


def sweep(args: argparse.Namespace, name: str, slow_fractions: str, repeats: int) -> Path:
    """Run `fsdp-bench sweep` of the point (a grid over debug.slow_fraction); returns its results folder."""
    results = args.out / name
    argv = [
        sys.executable, "-m", "bench", "sweep", *POINT, f"debug.slow_fraction={slow_fractions}",
        f"train.steps={args.timed_steps + args.warmup_steps}", f"train.warmup_steps={args.warmup_steps}",
        f"train.threads_per_rank={args.threads_per_rank}", f"sweep.repeats={repeats}", f"sweep.name={name}",
        f"results_dir={results}", "report=false",
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"sweep {name} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    print(f"sweep {name} (debug.slow_fraction={slow_fractions}) {time.perf_counter() - start:5.1f} s", flush=True)
    return results


def split_runs(results: Path, out: Path) -> dict[str, Path]:
    """Copy an interleaved sweep's records into clean_even / clean_odd / slow_odd folders (K runs each)."""
    from bench.analysis.records import load_records, write_record

    records, problems = load_records(results)
    if problems:
        raise SystemExit(f"unreadable records in {results}: {problems[:2]}")
    folders = {name: out / name for name in ("clean_even", "clean_odd", "slow_odd")}
    for record in records:
        kind = "slow" if record.spec.debug.slow_fraction else "clean"
        parity = "odd" if record.spec.repeat % 2 else "even"
        if f"{kind}_{parity}" in folders:
            write_record(record, folders[f"{kind}_{parity}"] / record.point_id / "result.json")
    return folders


def run_check(baseline: Path, current: Path, threshold: str) -> tuple[int, str]:
    """`fsdp-bench check CURRENT --baseline BASELINE --threshold T` in-process: (exit code, tokens/s row)."""
    from bench.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", str(current), "--baseline", str(baseline), "--threshold", threshold])
    row = next((line for line in out.getvalue().splitlines() if " tokens_per_s " in line), "")
    return code, " ".join(row.split()[5:])


def record_pair(pairs: list[dict], kind: str, baseline: Path, current: Path, threshold: str) -> None:
    code, row = run_check(baseline, current, threshold)
    pairs.append({"kind": kind, "baseline": str(baseline), "current": str(current), "exit": code, "tokens_per_s": row})
    print(f"{kind} {baseline.relative_to(baseline.parents[1])} -> {current.relative_to(current.parents[1])}: "
          f"exit {code}  {row}", flush=True)  # fmt: skip


def interleaved(args: argparse.Namespace) -> list[dict]:
    """Per comparison: one alternating clean/slow sweep of 2K repeats, split into sides of K runs."""
    pairs: list[dict] = []
    for i in range(args.comparisons):
        results = sweep(args, f"pair{i:02d}", f"0.0,{args.slow_fraction}", 2 * args.repeats)
        sides = split_runs(results, args.out / f"pair{i:02d}_sides")
        record_pair(pairs, "A/A", sides["clean_even"], sides["clean_odd"], args.threshold)
        record_pair(pairs, "A/B", sides["clean_even"], sides["slow_odd"], args.threshold)
    return pairs


def sequential(args: argparse.Namespace) -> list[dict]:
    """2N+1 sweeps of K repeats, clean/slow alternating; A/A: consecutive clean sweeps, A/B: clean then slow."""
    folders = [
        sweep(args, f"sweep{i:02d}", str(args.slow_fraction if i % 2 else 0.0), args.repeats)
        for i in range(2 * args.comparisons + 1)
    ]
    pairs: list[dict] = []
    for i in range(args.comparisons):
        record_pair(pairs, "A/A", folders[2 * i], folders[2 * i + 2], args.threshold)
        record_pair(pairs, "A/B", folders[2 * i], folders[2 * i + 1], args.threshold)
    return pairs


def rates(pairs: list[dict]) -> dict:
    """False alarms among A/A pairs, detections among A/B pairs (exit code 1 = regression reported)."""
    invalid = [p for p in pairs if p["exit"] not in (0, 1)]
    if invalid:
        raise SystemExit(f"{len(invalid)} check(s) could not compare (exit 2): {invalid[:2]}")
    aa = [p["exit"] for p in pairs if p["kind"] == "A/A"]
    ab = [p["exit"] for p in pairs if p["kind"] == "A/B"]
    return {"false_alarms": aa.count(1), "aa": len(aa), "detections": ab.count(1), "ab": len(ab)}


def _load(values: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(["scripts/validate_checks.py", *(argv if argv is not None else sys.argv[1:])])
    start, load_before = time.perf_counter(), os.getloadavg()
    pairs = interleaved(args) if args.protocol == "interleaved" else sequential(args)
    result = rates(pairs)
    minutes = (time.perf_counter() - start) / 60
    print(
        f"\nprotocol {args.protocol}: K={args.repeats} runs per side x {args.timed_steps} timed steps, threshold "
        f"{args.threshold}, slowdown debug.slow_fraction={args.slow_fraction} (+{args.slow_fraction:.0%} step time)\n"
        f"false alarms (A/A): {result['false_alarms']}/{result['aa']} = {result['false_alarms'] / result['aa']:.0%}\n"
        f"detected (A/B):     {result['detections']}/{result['ab']} = {result['detections'] / result['ab']:.0%}\n"
        f"total {minutes:.1f} min; load average (1/5/15 min) before {_load(load_before)}, "
        f"after {_load(os.getloadavg())} on {os.cpu_count()} cores\n"
        f"command: .venv/bin/python {command}"
    )
    doc = {"command": command, "args": {k: str(v) for k, v in vars(args).items()}, **result,
           "minutes": minutes, "pairs": pairs}  # fmt: skip
    (args.out / "validation.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
