#!/usr/bin/env python
"""Measure `fsdp-bench history`'s change-point detection on series built from real runs of this machine.

1. Pools (`--pools`): one sweep of a `debug` point (cpu_smoke's, narrowed to 1 rank, full_shard,
   fp32) over `debug.slow_fraction=0,0.05,0.1,0.2` with many repeats, run in one launch with the
   four slow-downs interleaved (r0 of every fraction, then r1, ...), so drift of the machine falls
   on every pool alike. A slow fraction F makes every timed step sleep F of its own time: +5 %,
   +10 %, +20 % step time (tokens/s x 1/1.05, 1/1.1, 1/1.2).
2. Series (`--series` per kind and design, LENGTH runs each): `contiguous` takes repeats s .. s+LENGTH-1
   of the pools from a random s, so a slowed run replaces the clean run measured beside it and the
   machine's drift stays in the series; `random` draws runs at random from the pools. A shifted
   series takes its runs from a slowed pool from a random run in [--min-before, LENGTH - --max-after].
3. Evaluation, as a nightly job sees it: after every run (from history's minimum length on), on the
   series so far:
   - history: `fsdp-bench history --fail-on-new-regression W`'s gate (bench.analysis.history.analyse) with
     the chosen detector (Otava, history's; or signal-processing-algorithms where installed);
   - check: `fsdp-bench check`'s tokens/s verdict (bench.analysis.check.compare, 5 % threshold) of the newest
     run against the run before it (a moving baseline, `--min-runs 1`) and, a second protocol,
     against the series' first 3 runs pooled.
   A clean series alerts when any evaluation fails; a shift is detected at the first evaluation
   after it that fails with a change point at most LOCATION_SLACK runs before the shift (runs to
   flag: slowed runs in the series then, 1 = the first), within W runs when that is <= W. Alerts
   before the shift of a shifted series are counted apart (false alerts).

4. Known noise (`--known-noise`): series built from real records (`--records`, default the committed
   fixtures' first ok record) with every timing of run i scaled by a log-normal run factor of known
   CV (`--cvs`) and, in shifted series, a 10 % slowdown (tokens/s x 0.9) placed --shift-before runs
   before the end; history's gate (`--fail-on-new-regression --window`, `--target-shift 10%`)
   evaluated at the end. Per CV: the share of shifted series caught, reported not gated, or passed
   silently; clean series' alerts; the stated detectable shift at that noise against the detection
   rate measured with a shift of exactly that size placed --window runs before the end (the table's
   promise: 95 %); the noise estimate against the CV; and nights of R repeats pooled by their median
   against the 1/sqrt(R) the repeats advice assumes.

    .venv/bin/python scripts/validate_history.py --pools --repeats 200 --timed-steps 20 --series 0
    .venv/bin/python scripts/validate_history.py --series 100 --min-after 1 2 3 --detectors otava otava-raw
    .venv/bin/python scripts/validate_history.py --known-noise --series 400 --length 20 --window 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

POINT = ["experiment=cpu_smoke", "nodes=1", "strategy=full_shard", "precision=fp32"]
FRACTIONS = (0.0, 0.05, 0.1, 0.2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", action="store_true", help="run the pool sweep first (else reuse --out's pools)")
    parser.add_argument("--repeats", type=int, default=300, help="runs per pool and chunk (default 300)")
    parser.add_argument("--chunks", type=int, default=1, help="pool sweeps, one after the other (default 1)")
    parser.add_argument("--quiet-below", type=float, help="start each chunk when the 1-min load average is below this")
    parser.add_argument(
        "--max-wait-min", type=float, default=10.0, help="longest wait for quiet per chunk (default 10)"
    )
    parser.add_argument("--timed-steps", type=int, default=20, help="timed steps per run (default 20)")
    parser.add_argument("--warmup-steps", type=int, default=2, help="warm-up steps per run (default 2)")
    parser.add_argument("--threads-per-rank", type=int, default=1, help="train.threads_per_rank (default 1)")
    parser.add_argument("--series", type=int, default=200, help="validation series per kind (default 200)")
    parser.add_argument("--length", type=int, default=30, help="runs per series (default 30)")
    parser.add_argument("--min-before", type=int, default=10, help="fewest clean runs before a shift (default 10)")
    parser.add_argument("--max-after", type=int, default=6, help="runs after the latest shift start (default 6)")
    parser.add_argument("--window", type=int, default=5, help="N of --fail-on-new-regression (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the series draws (default 0)")
    parser.add_argument(
        "--designs", nargs="+", choices=("contiguous", "random"), default=["contiguous", "random"],
        help="how series are drawn from the pools (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--detectors", nargs="+", default=["otava"],
        help="otava (history's detector), otava-raw, spa[:P], spa-raw[:P] (signal-processing-algorithms, "
        "p <= P, default 0.01); -raw: on the values instead of their logarithm",
    )  # fmt: skip
    parser.add_argument(
        "--min-after", nargs="+", type=int, default=[2],
        help="runs a change point needs after it to be reported, one evaluation per value (default 2: history's)",
    )  # fmt: skip
    parser.add_argument("--no-check", action="store_true", help="evaluate the detectors only, not `check`")
    parser.add_argument("--known-noise", action="store_true", help="series of known noise and step (4. above)")
    parser.add_argument(
        "--records", type=Path, default=REPO / "tests" / "fixtures" / "records" / "real",
        help="--known-noise: the real records to scale (default: the committed fixtures)",
    )  # fmt: skip
    parser.add_argument(
        "--cvs", nargs="+", type=float, default=[0.02, 0.035, 0.05], help="--known-noise: run-factor CVs"
    )
    parser.add_argument("--shift-before", type=int, default=4, help="--known-noise: runs after the step (default 4)")
    parser.add_argument("--repeats-check", type=int, default=4, help="--known-noise: R of the pooled nights")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "validate_history", help="output folder")
    return parser.parse_args(argv)


def run_pools(args: argparse.Namespace) -> Path:
    """The pool sweeps: --chunks sweeps of --repeats runs per slow fraction, each interleaved in one
    launch; with --quiet-below L each chunk waits (up to --max-wait-min) for the machine's 1-minute
    load average to fall below L, so the pools measure the machine, not its other users."""
    results = args.out / "pools"
    fractions = ",".join(str(f) for f in FRACTIONS)
    notes = []
    for chunk in range(args.chunks):
        waited = wait_for_quiet(args.quiet_below, args.max_wait_min) if args.quiet_below else 0.0
        name = "pools" if args.chunks == 1 else f"pools{chunk:02d}"
        argv = [
            sys.executable, "-m", "bench", "sweep", *POINT, f"debug.slow_fraction={fractions}",
            f"train.steps={args.timed_steps + args.warmup_steps}", f"train.warmup_steps={args.warmup_steps}",
            f"train.threads_per_rank={args.threads_per_rank}", f"sweep.repeats={args.repeats}", f"sweep.name={name}",
            f"results_dir={results}", "report=false",
        ]  # fmt: skip
        start, load = time.perf_counter(), os.getloadavg()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
        if proc.returncode != 0:
            raise SystemExit(f"pool sweep failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        minutes = (time.perf_counter() - start) / 60
        notes.append({"sweep": name, "command": " ".join(argv[1:]), "waited_min": waited, "minutes": minutes,
                      "load_before": load, "load_after": os.getloadavg()})  # fmt: skip
        (args.out / "pools.json").write_text(json.dumps(notes, indent=1) + "\n")
        print(f"pool sweep {name}: waited {waited:.1f} min, ran {minutes:.1f} min, load {load[0]:.1f} -> "
              f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    return results


def wait_for_quiet(below: float, max_minutes: float) -> float:
    """Minutes waited until the 1-minute load average fell below `below` (or `max_minutes` passed)."""
    start = time.monotonic()
    while os.getloadavg()[0] >= below and time.monotonic() - start < max_minutes * 60:
        time.sleep(5)
    return (time.monotonic() - start) / 60


def load_pools(args: argparse.Namespace) -> dict[float, list]:
    """The pool sweep's ok records per slow fraction, in repeat order (= the order they ran)."""
    from bench.analysis.records import load_records

    records, problems = load_records(args.out / "pools")
    if problems or not records:
        raise SystemExit(f"pools: {len(records)} records, {len(problems)} unreadable in {args.out / 'pools'}")
    pools: dict[float, list] = {f: [] for f in FRACTIONS}
    for record in sorted(records, key=lambda r: (r.sweep, r.spec.repeat)):  # the order they ran
        if record.status == "ok":
            pools[record.spec.debug.slow_fraction].append(record)
    usable = min(len(p) for p in pools.values())
    return {f: p[:usable] for f, p in pools.items()}


def draw(pools: dict[float, list], fraction: float, length: int, shift: int, rng, design: str) -> list:
    """One series of records: clean runs, then (from `shift` on) runs of the `fraction` pool.

    contiguous: repeats s .. s+length-1 of the pools, so a slow run replaces the clean run measured
        beside it (same minute, same machine state) and the machine's real drift stays in the series;
    random: runs drawn at random (without replacement) from the pools: independent runs with the
        pool's whole spread.
    """
    clean, slow = pools[0.0], pools[fraction]
    if design == "contiguous":
        start = int(rng.integers(0, len(clean) - length + 1))
        return clean[start : start + shift] + slow[start + shift : start + length]
    first = rng.choice(len(clean), size=shift, replace=False)
    then = rng.choice(len(slow), size=length - shift, replace=False)
    return [clean[i] for i in first] + [slow[i] for i in then]


def as_series(records: list):
    """A history Series of these records in this order (their own start times would reorder them)."""
    from bench.analysis.check.points import record_steps
    from bench.analysis.history.series import Run, Series

    first = records[0]
    series = Series("validation", "validation", "tokens_per_s", tokens_per_step=float(first.metrics.tokens_per_step))
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for night, record in enumerate(records):
        moment = base + timedelta(days=night)
        series.runs.append(Run(record.sweep, moment, record.metrics.tokens_per_s, [record_steps(record)], record))
    return series


def history_failures(records: list, args: argparse.Namespace, detector) -> dict[int, list[int]]:
    """For every prefix length (a night's series so far): the first runs of the change points for the
    worse that `history --fail-on-new-regression W` fails on (empty: it passes)."""
    from bench.analysis.history.analyse import analyse_series
    from bench.analysis.history.detect import MIN_SERIES_RUNS

    series = as_series(records)
    failures = {}
    for length in range(MIN_SERIES_RUNS, len(records) + 1):
        prefix = type(series)(series.key, series.label, series.metric, series.runs[:length], series.tokens_per_step)
        result = analyse_series(prefix, window=args.window, numerics=False, detector=detector, intervals=False)
        failures[length] = [item.index for item in result.failing]
    return failures


def check_failures(records: list, fixed: int = 0) -> list[int]:
    """The runs (indices) that `fsdp-bench check`'s tokens/s verdict calls a regression.

    fixed=0: each run against the run before it (a moving baseline); fixed=K: each run from K on
    against the series' first K runs pooled. One run a side needs `--min-runs 1` to gate at all.
    """
    from bench.analysis.check.compare import compare_timing
    from bench.analysis.check.points import points_from_records
    from bench.analysis.check.thresholds import Thresholds

    threshold = Thresholds()["tokens_per_s"]
    points = [points_from_records([r])[0] for r in records]
    baseline = points_from_records(records[:fixed])[0] if fixed else None
    failing = []
    for index in range(max(1, fixed), len(records)):
        finding = compare_timing("p", baseline or points[index - 1], points[index], threshold, alpha=0.05,
                                 gating=True, min_runs=1)  # fmt: skip
        if finding is not None and finding.fails:
            failing.append(index)
    return failing


# A change point counts as the injected one when it lies at most this many runs before the shift.
LOCATION_SLACK = 2


def history_outcome(failures: dict[int, list[int]], shift: int) -> tuple[bool, int | None]:
    """(an alert before the shift, slow runs in the series when the shift was flagged or None)."""
    early = any(failures[t] for t in failures if t <= shift)
    flagged = [t - shift for t in failures if t > shift and any(i >= shift - LOCATION_SLACK for i in failures[t])]
    return early, min(flagged, default=None)


def check_outcome(failing: list[int], shift: int) -> tuple[bool, int | None]:
    early = any(i < shift for i in failing)
    return early, min((i - shift + 1 for i in failing if i >= shift), default=None)


def spa_detector(pvalue: float, permutations: int = 100, log_scale: bool = True, min_after: int = 1):
    """MongoDB's signal-processing-algorithms e_divisive as a history detector, on the same scale and
    with the same confirmation rule as history's (seeded: it permutes with numpy's global generator).
    Its p-value is the permutation test's bound; reported as `pvalue`."""
    import numpy as np
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    from bench.analysis.history.detect import MIN_SERIES_RUNS, Detected

    def detect(values):
        if len(values) < MIN_SERIES_RUNS:
            return []
        np.random.seed(0)
        series = np.log(values) if log_scale else np.asarray(values, dtype=float)
        found = sorted(e_divisive(series, pvalue=pvalue, permutations=permutations))
        return [Detected(int(i), pvalue) for i in found if len(values) - i >= min_after]

    return detect


def detectors(names: list[str], min_after: list[int]) -> dict:
    """otava[-raw] (history's detector; -raw: on values, not their logarithm), spa[-raw][:P], each
    reporting change points with at least N runs after them, for every N of `min_after`."""
    from functools import partial

    from bench.analysis.history.detect import MAX_PVALUE, detect

    found = {}
    for name in names:
        kind, _, pvalue = name.partition(":")
        raw = kind.endswith("-raw")
        scale = "values" if raw else "log"
        for after in min_after:
            if kind.startswith("otava"):
                label = f"history: otava p<{MAX_PVALUE:g} {scale} >={after} after"
                found[label] = partial(detect, log_scale=not raw, min_after=after)
            elif kind.startswith("spa"):
                p = float(pvalue or 0.01)
                found[f"history: spa p<={p:g} {scale} >={after} after"] = spa_detector(
                    p, log_scale=not raw, min_after=after
                )
            else:
                raise SystemExit(f"--detectors: unknown {name!r}; allowed: otava, otava-raw, spa[:P], spa-raw[:P]")
    return found


def evaluate(args: argparse.Namespace, pools: dict[float, list], design: str, rng) -> list[dict]:
    """Every method on the same series: per kind (clean, +5/10/20 %), alerts and detection delays."""
    methods = detectors(args.detectors, args.min_after)
    rows = []
    for fraction in FRACTIONS:
        kind = "clean" if fraction == 0 else f"+{fraction:.0%} step time"
        checks = [] if args.no_check else ["check vs the run before", "check vs first 3 runs"]
        outcomes: dict[str, list] = {name: [] for name in [*methods, *checks]}
        for _ in range(args.series):
            shift = (
                args.length if fraction == 0 else int(rng.integers(args.min_before, args.length - args.max_after + 1))
            )
            records = draw(pools, fraction, args.length, shift, rng, design)
            for name, detector in methods.items():
                outcomes[name].append(history_outcome(history_failures(records, args, detector), shift))
            if checks:
                outcomes[checks[0]].append(check_outcome(check_failures(records), shift))
                outcomes[checks[1]].append(check_outcome(check_failures(records, fixed=3), shift))
        for name, results in outcomes.items():
            rows.append(_row(design, kind, name, results, args.window))
            print(_format(rows[-1]), flush=True)
    return rows


def _row(design: str, kind: str, method: str, results: list, window: int) -> dict:
    early = sum(1 for e, _ in results if e)
    delays = [d for _, d in results if d is not None]
    within = sum(1 for d in delays if d <= window)
    median = sorted(delays)[len(delays) // 2] if delays else None
    return {"design": design, "kind": kind, "method": method, "series": len(results), "alerted_before": early,
            "detected_within": within, "detected": len(delays), "median_delay": median}  # fmt: skip


def _format(row: dict) -> str:
    n = row["series"]
    if row["kind"] == "clean":
        return f"{row['design']:10} {row['kind']:18} {row['method']:42} false alerts {row['alerted_before']}/{n}"
    return (f"{row['design']:10} {row['kind']:18} {row['method']:42} detected within W {row['detected_within']}/{n}, "
            f"ever {row['detected']}/{n}, median runs to flag {row['median_delay']}, "
            f"alerts before the shift {row['alerted_before']}/{n}")  # fmt: skip


def pool_summary(pools: dict[float, list]) -> list[str]:
    """Median tokens/s and run-to-run spread of each pool, and the slowdown against the clean run
    measured beside each slowed one (the same repeat index: the same minute of the machine)."""
    import numpy as np

    clean = np.array([r.metrics.tokens_per_s for r in pools[0.0]])
    lines = []
    for fraction, records in pools.items():
        values = np.array([r.metrics.tokens_per_s for r in records])
        q10, q50, q90 = np.percentile(values, [10, 50, 90])
        paired = np.median(values / clean) - 1
        lines.append(f"pool slow_fraction={fraction}: {len(values)} runs, median {q50:,.0f} tokens/s, "
                     f"p10 {q10:,.0f}, p90 {q90:,.0f} (p90/p10 {q90 / q10:.2f}); median change against "
                     f"the clean run beside it {paired:+.1%}")  # fmt: skip
    return lines


def scaled_series(record, factors: list[float]):
    """A history Series of the real `record`, run i's step times divided by factors[i] (its tokens/s
    multiplied by it), one night apart."""
    from bench.analysis.check.points import record_steps
    from bench.analysis.history.series import Run, Series

    steps = record_steps(record)
    series = Series("known", "known noise", "tokens_per_s", tokens_per_step=float(record.metrics.tokens_per_step))
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for night, factor in enumerate(factors):
        moment = base + timedelta(days=night)
        value = record.metrics.tokens_per_s * factor
        series.runs.append(Run(record.sweep, moment, value, [[t / factor for t in steps]], record))
    return series


def known_noise(args: argparse.Namespace) -> list[dict]:
    """4. of the docstring: per CV, the gate's outcome on clean and shifted series of known noise."""
    import numpy as np

    from bench.analysis.history.analyse import analyse_series
    from bench.analysis.history.power import as_fraction, noise, power_table
    from bench.analysis.records import load_records

    records, _ = load_records(args.records)
    record = next(r for r in records if r.status == "ok" and r.metrics.step_times_s)
    rng = np.random.default_rng(args.seed)
    n, length, step_at = args.series, args.length, args.length - args.shift_before

    def gate(factors):
        result = analyse_series(scaled_series(record, list(factors)), window=args.window, numerics=False,
                                intervals=False, target_shift=0.10)  # fmt: skip
        return bool(result.failing), result.not_gated, result.power

    rows = []
    for cv in args.cvs:
        sigma = math.sqrt(math.log(1 + cv**2))  # the log-normal factor's CV is cv
        draws = lambda sigma=sigma: np.exp(rng.normal(0.0, sigma, length))  # noqa: E731
        clean = [gate(draws()) for _ in range(n)]
        step = np.where(np.arange(length) >= step_at, 0.9, 1.0)
        shifted = [gate(draws() * step) for _ in range(n)]
        per_noise = power_table().lookup(length - args.window, args.window)
        stated = as_fraction(per_noise * sigma, True) if per_noise is not None else None
        measured = None
        if stated is not None:
            at = np.where(np.arange(length) >= length - args.window, 1.0 - stated, 1.0)
            measured = sum(gate(draws() * at)[0] for _ in range(n)) / n
        estimates = [p.noise for _, _, p in clean if p is not None and p.noise is not None]
        pooled = [
            noise(list(np.median(np.exp(rng.normal(0.0, sigma, (length, args.repeats_check))), axis=1)))
            for _ in range(n)
        ]  # fmt: skip
        row = {
            "cv": cv, "sigma": sigma, "series": n, "length": length, "window": args.window,
            "shift_before_end": args.shift_before,
            "clean_alerts": sum(c for c, _, _ in clean), "clean_not_gated": sum(g for _, g, _ in clean),
            "shifted_caught": sum(c for c, _, _ in shifted),
            "shifted_not_gated": sum(g and not c for c, g, _ in shifted),
            "shifted_silent": sum(not c and not g for c, g, _ in shifted),
            "stated_detectable": stated, "measured_rate_at_stated": measured,
            "noise_estimate_median": float(np.median(estimates)) if estimates else None,
            "pooled_noise_ratio": float(np.median(pooled) / (sigma / math.sqrt(args.repeats_check))),
        }  # fmt: skip
        rows.append(row)
        print(_known_format(row), flush=True)
    return rows


def _known_format(row: dict) -> str:
    n = row["series"]
    stated = "-" if row["stated_detectable"] is None else f"{row['stated_detectable']:.1%}"
    measured = "-" if row["measured_rate_at_stated"] is None else f"{row['measured_rate_at_stated']:.1%}"
    return (
        f"CV {row['cv']:.1%} (log sd {row['sigma']:.4f}): 10% step {row['shift_before_end']} runs before the end of "
        f"{row['length']}: caught {row['shifted_caught']}/{n}, not gated {row['shifted_not_gated']}/{n}, silent "
        f"{row['shifted_silent']}/{n}; clean: alerts {row['clean_alerts']}/{n}, not gated {row['clean_not_gated']}/{n}; "
        f"stated detectable {stated}, measured rate at it {measured}; noise estimate median "
        f"{row['noise_estimate_median']:.4f}; pooled-median noise / (sd/sqrt(R)) {row['pooled_noise_ratio']:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.known_noise:
        start = time.perf_counter()
        rows = known_noise(args)
        command = " ".join(["scripts/validate_history.py", *(argv if argv is not None else sys.argv[1:])])
        doc = {"command": command, "rows": rows, "minutes": (time.perf_counter() - start) / 60}
        (args.out / f"known-noise-{args.series}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"evaluation {doc['minutes']:.1f} min; command: .venv/bin/python {command}")
        return 0
    if args.pools:
        run_pools(args)
    pools = load_pools(args)
    for line in pool_summary(pools):
        print(line)
    start = time.perf_counter()
    rows = []
    for design in args.designs:
        rows += evaluate(args, pools, design, np.random.default_rng(args.seed))
    command = " ".join(["scripts/validate_history.py", *(argv if argv is not None else sys.argv[1:])])
    doc = {
        "command": command,
        "pools": pool_summary(pools),
        "rows": rows,
        "minutes": (time.perf_counter() - start) / 60,
    }
    (args.out / f"validation-{'-'.join(args.detectors)}-{args.series}.json").write_text(
        json.dumps(doc, indent=1) + "\n"
    )
    print(f"evaluation {doc['minutes']:.1f} min; command: .venv/bin/python {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
