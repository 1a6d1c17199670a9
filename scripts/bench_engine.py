#!/usr/bin/env python
"""Benchmark of the engine on this machine: tokens/s of `tiny` at world size 1 and 2, and the
harness's overhead check.

Overhead check: two runs that differ only in step count, A and B. Everything fixed (interpreter
start, rendezvous, model build, warm-up, record writing) cancels in the difference, so

    derived tokens/s = tokens_per_step * (steps_B - steps_A) / (wall_B - wall_A)

is the throughput an outside clock sees, per-step overhead included (the barrier, Python
between steps, whatever the step timer misses). The harness reports tokens_per_step / median
step time; the ratio reported / derived must be 1.00 +/- 0.05 (`verdict`: a bias every pair shows,
not one that the spread between pairs explains).

Which wall time: the records' `timed_window_s`, rank 0's clock from the start of the first
timed step to the end of the loop. It holds the timed steps and everything between them, so
its difference between A and B is exactly the extra steps plus all per-step overhead. The
record's `wall_s` starts before the rendezvous, so it also carries the other ranks' start-up
jitter (seconds on a shared 2-core host, nothing to do with steps); the CLI's wall time adds
interpreter start-up on top. Both are shown, not judged. The reported figure is run B's
(a median of its step times): a median ignores the occasional slow step that the wall clock
pays for, so on a busy machine the ratio drifts above 1.

    .venv/bin/python scripts/bench_engine.py            # minutes on 2 cores
    .venv/bin/python scripts/bench_engine.py --repeats 1 --worlds 1
Exit code 1 when a world size's pairs all put the ratio beyond the tolerance on the same side, 0
otherwise (a median beyond it with a pair within is `noise`: single pairs spread widely on a
2-core VM, docs/results/engine.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.analysis.records import load_records  # noqa: E402 - needs ROOT on sys.path when run as a script

TOLERANCE = 0.05


@dataclass(frozen=True)
class Run:
    """What one `fsdp-bench run` left: its record's figures and the CLI's own wall time."""

    steps: int
    tokens_per_step: int
    tokens_per_s: float
    step_median_s: float
    wall_s: float
    timed_window_s: float
    cli_wall_s: float


def run_point(args: argparse.Namespace, world: int, steps: int, results: Path) -> Run:
    """One point through the CLI (as a user runs it); raises if it is not ok."""
    overrides = [
        f"model={args.model}",
        f"nodes={world}",
        f"train.steps={steps}",
        f"train.warmup_steps={args.warmup}",
        f"results_dir={results}",
        "sweep.name=bench_engine",
    ]
    if args.seq_len:
        overrides.append(f"train.seq_len={args.seq_len}")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench", "run", *overrides], capture_output=True, text=True)
    cli_wall = time.perf_counter() - started
    (record,), _ = load_records(results)
    if proc.returncode != 0 or record.status != "ok":
        raise SystemExit(f"run failed ({record.status}: {record.error})\n{proc.stdout}\n{proc.stderr}")
    m = record.metrics
    return Run(
        steps, m.tokens_per_step, m.tokens_per_s, m.step_time_s.median, record.wall_s, m.timed_window_s, cli_wall
    )


def derived(a: Run, b: Run, field: str) -> float:
    """tokens/s implied by the difference of one wall-time measure between runs A and B."""
    return b.tokens_per_step * (b.steps - a.steps) / (getattr(b, field) - getattr(a, field))


def measure_world(args: argparse.Namespace, world: int, scratch: Path) -> dict:
    """`repeats` pairs of runs (A, B) at one world size, summarised by medians."""
    pairs = []
    for repeat in range(args.repeats):
        a = run_point(args, world, args.steps_a, scratch / f"w{world}-r{repeat}-a")
        b = run_point(args, world, args.steps_b, scratch / f"w{world}-r{repeat}-b")
        pairs.append((a, b))
        print(
            f"  world {world} repeat {repeat}: reported {b.tokens_per_s:,.0f} tok/s, "
            f"derived (timed window) {derived(a, b, 'timed_window_s'):,.0f} tok/s",
            file=sys.stderr,
        )
    med = statistics.median
    ratios = [b.tokens_per_s / derived(a, b, "timed_window_s") for a, b in pairs]
    return {
        "world_size": world,
        "reported_tokens_per_s": med(b.tokens_per_s for _, b in pairs),
        "step_time_median_s": med(b.step_median_s for _, b in pairs),
        "derived_timed_window": med(derived(a, b, "timed_window_s") for a, b in pairs),
        "derived_wall_s": med(derived(a, b, "wall_s") for a, b in pairs),
        "derived_cli_wall": med(derived(a, b, "cli_wall_s") for a, b in pairs),
        "ratio": med(ratios),
        "ratios": ratios,
    }


# (header, how to format a row): a markdown table, pasted as is into docs/results/engine.md.
COLUMNS = (
    ("world", lambda r: str(r["world_size"])),
    ("reported tok/s", lambda r: f"{r['reported_tokens_per_s']:,.0f}"),
    ("step median ms", lambda r: f"{r['step_time_median_s'] * 1e3:.1f}"),
    ("derived tok/s (timed window)", lambda r: f"{r['derived_timed_window']:,.0f}"),
    ("ratio (median of pairs)", lambda r: f"{r['ratio']:.3f}"),
    ("pair ratios", lambda r: " ".join(f"{x:.3f}" for x in r["ratios"])),
    ("verdict", lambda r: verdict(r["ratio"], r["ratios"])),
    ("derived (wall_s)", lambda r: f"{r['derived_wall_s']:,.0f}"),
    ("derived (CLI wall)", lambda r: f"{r['derived_cli_wall']:,.0f}"),
)


def verdict(ratio: float, ratios: list[float]) -> str:
    """`ok` when the median ratio is within 1.00 +/- TOLERANCE; `outside ...` when every pair's is beyond
    it on the same side (a bias the harness has, whatever the load between a pair's two runs); `noise`
    when the median is beyond it but some pair's is not (the load moved between runs: measure again)."""
    if abs(ratio - 1) <= TOLERANCE:
        return "ok"
    if all(r > 1 + TOLERANCE for r in ratios) or all(r < 1 - TOLERANCE for r in ratios):
        return f"outside 1.00 +/- {TOLERANCE}"
    return "noise"


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    print(
        f"model={args.model} warmup={args.warmup} steps A={args.steps_a} B={args.steps_b} "
        f"repeats={args.repeats} (medians over repeats)"
    )
    print("| " + " | ".join(name for name, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(cell(row) for _, cell in COLUMNS) + " |")
    if len(rows) == 2 and rows[0]["world_size"] == 1:
        scale = rows[1]["reported_tokens_per_s"] / rows[0]["reported_tokens_per_s"]
        print(f"world 2 / world 1 tokens/s: {scale:.2f} (same per-rank batch, so the global batch doubles)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--worlds", default="1,2", help="comma-separated world sizes (nodes=N on this host)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps-a", type=int, default=6)
    parser.add_argument("--steps-b", type=int, default=26)
    parser.add_argument("--seq-len", type=int, default=0, help="0 = the flavor's default")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_engine-") as scratch:
        rows = [measure_world(args, int(w), Path(scratch)) for w in args.worlds.split(",")]
    print_table(rows, args)
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "rows": rows}, indent=2))
    return 1 if any(verdict(r["ratio"], r["ratios"]).startswith("outside") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
