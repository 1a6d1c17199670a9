#!/usr/bin/env python
"""Measure the false-alarm and detection rates of `fsdp-bench check` on this machine, with real runs.

Runs 2N+1 sweeps of one `debug` point, each with K repeats (`sweep.repeats=K`), alternating a
clean sweep and one slowed by `debug.slow_fraction` (every timed step sleeps that fraction of
its own time: +10% step time for 0.1):

    clean0 slow0 clean1 slow1 ... clean(N-1) slow(N-1) cleanN

then runs `fsdp-bench check` (in-process, the same code as the CLI) on
    N A/A pairs   (baseline clean_i, current clean_i+1): an exit code 1 is a false alarm;
    N A/B pairs   (baseline clean_i, current slow_i):    an exit code 1 is a detection.
Alternation spreads slow drift of the machine over both kinds of pair. Prints one line per
comparison, the two rates, and writes OUT/validation.json.

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
    parser.add_argument("--comparisons", type=int, default=20, help="A/A pairs and A/B pairs, each (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="K: repeats per sweep (sweep.repeats, default 3)")
    parser.add_argument("--timed-steps", type=int, default=100, help="timed steps per run (default 100)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="warm-up steps per run (default 5)")
    # 1 thread: with 2 OpenMP threads on 2 cores, a neighbour busy on one core stalls every step.
    parser.add_argument("--threads-per-rank", type=int, default=1, help="train.threads_per_rank (default 1)")
    parser.add_argument("--slow-fraction", type=float, default=0.1, help="debug.slow_fraction of B (default 0.1)")
    parser.add_argument("--threshold", default="tokens_per_s:-5%", help="check threshold (default tokens_per_s:-5%%)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "validate_checks", help="output folder")
    return parser.parse_args(argv)


def sweep_command(args: argparse.Namespace, index: int, slow: bool) -> list[str]:
    """The `fsdp-bench sweep` argv of one side: K repeats of the point, in its own results folder."""
    fraction = args.slow_fraction if slow else 0.0
    return [
        sys.executable, "-m", "bench", "sweep", *POINT,
        f"train.steps={args.timed_steps + args.warmup_steps}", f"train.warmup_steps={args.warmup_steps}",
        f"train.threads_per_rank={args.threads_per_rank}", f"sweep.repeats={args.repeats}", f"sweep.name=validate{index:02d}", f"debug.slow_fraction={fraction}",
        f"results_dir={args.out / f'sweep{index:02d}'}", "report=false",
    ]  # fmt: skip


def run_sweeps(args: argparse.Namespace) -> list[dict]:
    """clean, slow, clean, slow, ..., clean: 2N+1 sweeps; returns one entry per sweep."""
    sweeps = []
    for index in range(2 * args.comparisons + 1):
        slow = index % 2 == 1
        start = time.perf_counter()
        proc = subprocess.run(sweep_command(args, index, slow), capture_output=True, text=True, cwd=REPO)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(
                f"sweep {index} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )
        sweeps.append({"index": index, "slow": slow, "dir": str(args.out / f"sweep{index:02d}"), "seconds": seconds})
        print(f"sweep {index:2d} {'slow ' if slow else 'clean'} {seconds:5.1f} s", flush=True)
    return sweeps


def run_check(baseline: str, current: str, threshold: str) -> tuple[int, str]:
    """`fsdp-bench check CURRENT --baseline BASELINE --threshold T` in-process: (exit code, tokens/s row)."""
    from bench.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", current, "--baseline", baseline, "--threshold", threshold])
    row = next((line for line in out.getvalue().splitlines() if " tokens_per_s " in line), "")
    return code, row


def compare_pairs(args: argparse.Namespace, sweeps: list[dict]) -> list[dict]:
    """The N A/A and N A/B checks; each with its exit code and the tokens/s row of the table."""
    pairs = []
    for i in range(args.comparisons):
        clean, slow, next_clean = sweeps[2 * i], sweeps[2 * i + 1], sweeps[2 * i + 2]
        for kind, current in (("A/A", next_clean), ("A/B", slow)):
            code, row = run_check(clean["dir"], current["dir"], args.threshold)
            pairs.append(
                {
                    "kind": kind,
                    "baseline": clean["index"],
                    "current": current["index"],
                    "exit": code,
                    "tokens_per_s": " ".join(row.split()[5:]),
                }
            )
            print(
                f"{kind} sweep{clean['index']:02d} -> sweep{current['index']:02d}: exit {code}  {pairs[-1]['tokens_per_s']}"
            )
    return pairs


def rates(pairs: list[dict]) -> dict:
    """False alarms among A/A pairs, detections among A/B pairs (exit code 1 = regression reported)."""
    aa = [p for p in pairs if p["kind"] == "A/A"]
    ab = [p for p in pairs if p["kind"] == "A/B"]
    invalid = [p for p in pairs if p["exit"] not in (0, 1)]
    if invalid:
        raise SystemExit(f"{len(invalid)} check(s) could not compare (exit 2): {invalid[:2]}")
    return {
        "false_alarms": sum(p["exit"] == 1 for p in aa), "aa": len(aa),
        "detections": sum(p["exit"] == 1 for p in ab), "ab": len(ab),
    }  # fmt: skip


def _load(values: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(["scripts/validate_checks.py", *(argv if argv is not None else sys.argv[1:])])
    start, load_before = time.perf_counter(), os.getloadavg()
    sweeps = run_sweeps(args)
    pairs = compare_pairs(args, sweeps)
    result = rates(pairs)
    minutes = (time.perf_counter() - start) / 60
    print(
        f"\nK={args.repeats} repeats x {args.timed_steps} timed steps per sweep, threshold {args.threshold}, "
        f"slowdown debug.slow_fraction={args.slow_fraction} (+{args.slow_fraction:.0%} step time)\n"
        f"false alarms (A/A): {result['false_alarms']}/{result['aa']} = {result['false_alarms'] / result['aa']:.0%}\n"
        f"detected (A/B):     {result['detections']}/{result['ab']} = {result['detections'] / result['ab']:.0%}\n"
        f"total {minutes:.1f} min; load average (1/5/15 min) before {_load(load_before)}, after {_load(os.getloadavg())} "
        f"on {os.cpu_count()} cores\n"
        f"command: .venv/bin/python {command}"
    )
    doc = {"command": command, "args": {k: str(v) for k, v in vars(args).items()}, **result,
           "minutes": minutes, "sweeps": sweeps, "pairs": pairs}  # fmt: skip
    (args.out / "validation.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
