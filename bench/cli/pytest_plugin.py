"""pytest plugin: the `fsdp_point` fixture runs one benchmark point and records it in pytest-benchmark.

    def test_throughput(fsdp_point):
        rec = fsdp_point("model=debug nodes=1 train.steps=20")
        assert rec.metrics.tokens_per_s > 1000

Each call runs `fsdp-bench run OVERRIDES results_dir=<tmp>` in a subprocess (the same path a user
takes), returns the validated RunResult, and puts the point's tokens/s, step time, MFU, memory
and communication into pytest-benchmark's `extra_info`, so `pytest --benchmark-enable
--benchmark-json out.json` keeps them next to the benchmark. The first call of a test is also
the benchmark's timed target (one round: the wall time of the whole run).

Registered under [project.entry-points.pytest11]: importing this module must stay cheap and
torch-free, because pytest loads it in every session of this environment.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.schema.labels import point_label

# A debug point takes seconds; 600 s matches sweep.point_timeout_s's default.
DEFAULT_TIMEOUT_S = 600.0


class PointRunner:
    """The callable behind the `fsdp_point` fixture (one per test)."""

    def __init__(self, tmp_dir: Path, benchmark: Any | None) -> None:
        self.tmp_dir = tmp_dir
        self.benchmark = benchmark
        self.calls = 0

    def __call__(
        self, overrides: str | Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S, require_ok: bool = True
    ):
        """Run one point (Hydra overrides as a string or a list) and return its RunResult."""
        args = shlex.split(overrides) if isinstance(overrides, str) else list(overrides)
        results_dir = self.tmp_dir / f"point{self.calls}"
        self.calls += 1
        command = [sys.executable, "-m", "bench", "run", *args, f"results_dir={results_dir}"]
        if self.benchmark is not None and self.calls == 1:
            proc = self.benchmark.pedantic(_run, args=(command, timeout_s), rounds=1, iterations=1)
        else:
            proc = _run(command, timeout_s)
        record = _read_single_record(results_dir, proc)
        if require_ok and record.status != "ok":
            pytest.fail(f"fsdp_point({' '.join(args)}): status {record.status}: {record.error}", pytrace=False)
        if self.benchmark is not None:
            _record_extra_info(self.benchmark.extra_info, record, first=self.calls == 1)
        return record


def _run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)


def _read_single_record(results_dir: Path, proc: subprocess.CompletedProcess):
    """The one record the run wrote; a run that wrote none (invalid input) fails the test with its output."""
    from bench.analysis.records import load_records

    records, problems = load_records(results_dir) if results_dir.exists() else ([], [])
    if len(records) != 1:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        reasons = [p.reason for p in problems]
        pytest.fail(f"fsdp-bench run exited {proc.returncode} without one record: {tail + reasons}", pytrace=False)
    return records[0]


def point_extra_info(record) -> dict[str, Any]:
    """The numbers of one record that pytest-benchmark's JSON should keep."""
    metrics = record.metrics
    spec = record.spec
    return {
        "point_id": record.point_id,
        "point": point_label(spec),
        "status": record.status,
        "tokens_per_s": metrics.tokens_per_s,
        "tokens_per_s_per_device": metrics.tokens_per_s_per_device,
        "step_time_median_s": metrics.step_time_s.median if metrics.step_time_s else None,
        "step_time_cv": metrics.step_time_s.cv if metrics.step_time_s else None,
        "timed_steps": len(metrics.step_times_s),
        "mfu": metrics.mfu,
        "peak_mem_bytes": metrics.peak_mem_bytes.max if metrics.peak_mem_bytes else None,
        "comm_bytes_per_step": metrics.comm_bytes_per_step.model_dump() if metrics.comm_bytes_per_step else None,
    }


def _record_extra_info(extra_info: dict, record, *, first: bool) -> None:
    """The first point's numbers at the top level; every point's in `fsdp_points`."""
    info = point_extra_info(record)
    if first:
        extra_info.update(info)
    extra_info.setdefault("fsdp_points", []).append(info)


@pytest.fixture
def fsdp_point(request: pytest.FixtureRequest, tmp_path: Path) -> PointRunner:
    """Run benchmark points from a test: `fsdp_point("model=debug nodes=1")` returns the RunResult."""
    try:
        benchmark = request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:  # pytest-benchmark not installed: run without recording
        benchmark = None
    return PointRunner(tmp_path, benchmark)
