"""Every benchmark still runs: `benchmarks/run.py --smoke` runs each timed script once at a tiny size
(its own records, the real command line) and the pytest-benchmark hot paths once each, untimed
(`--benchmark-disable`). Timings are `make bench`'s business, never asserted here; what is asserted
is what each benchmark made and measured."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# About 26 s on 2 cores: each script's records and its fsdp-bench processes, and pytest importing torch.
@pytest.mark.slow
def test_every_benchmark_runs_at_a_tiny_size():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--smoke"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=240
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    # Each script made its records, ran its command once and printed the run line the harness reads.
    assert "bench_report: 40 records written" in out and "(every record read)" in out
    assert "(their rows kept by an untimed report)" in out and "bench_report: 40 records, warm, " in out
    assert "bench_store: 20 records written" in out and "bench_store: store add of 20 records" in out
    assert "bench_history: 60 records in" in out and "bench_history: history of 60 runs" in out
    for name in ("bench_report", "bench_store", "bench_history"):
        assert f"{name}: run 1: " in out and f"{name}: run 2: " not in out
    # The five hot paths ran once each.
    assert "5 passed" in out
    # Every script of benchmarks/measuring.py's SCRIPTS ran once (one run line each), plus the pytest group.
    scripts = len(re.findall(r"^[\w.-]+: run 1: ", out, re.MULTILINE))
    assert scripts >= 3 and out.splitlines()[-1] == f"bench: smoke PASS: {scripts + 1} of {scripts + 1} ran"


# About 5 s: 40 records, their figures drawn once each.
@pytest.mark.slow
def test_the_figures_benchmark_times_every_figure():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "benchmarks/bench_figures.py", "--records", "40", "--rounds", "1"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "throughput", "efficiency", "tokens_per_device", "mfu", "energy", "memory", "step_times", "checkpoint",
        "startup", "where_efficiency_went",
    ]  # fmt: skip
    assert all(re.fullmatch(r"\w+: \d+ ms", line) for line in lines[:-1])
    assert lines[-1].startswith("bench_figures: ") and lines[-1].endswith(" ms in all (40 records, median of 1)")
