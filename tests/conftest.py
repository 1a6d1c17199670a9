"""Fixtures shared by every test folder.

`fsdp_bench` runs the console script as a user does (a subprocess in its own session, killed
with everything it started if it outlives its timeout) and returns (rc, stdout, stderr,
records), records being every valid result.json under the results folder it was pointed at.
`worker_processes` lists rank and agent processes still alive that belong to a results folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bench_cli import CLI, finish

from bench.analysis.records import load_records
from bench.schema.record import RunResult


def pytest_collection_modifyitems(config, items):
    """`gpu` tests need an NVIDIA GPU: skip them, with the reason, where none is visible."""
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi finds none)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Tests run sweeps side by side (two xdist workers): they skip the host lock, as a CI job running
# several benchmarks at once would; tests/e2e/test_locks.py clears this to test the lock itself.
os.environ.setdefault("FSDP_BENCH_ALLOW_CONCURRENT", "1")


@dataclass
class CliRun:
    """What one `fsdp-bench` invocation left: unpacks as (rc, stdout, stderr, records)."""

    rc: int
    stdout: str
    stderr: str
    records: list[RunResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    def __iter__(self):
        return iter((self.rc, self.stdout, self.stderr, self.records))


def run_cli(*args: object, results: Path | None = None, timeout: float = 180.0) -> CliRun:
    """Run `fsdp-bench ARGS...`; on timeout kill its whole process group and fail the test."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    rc, stdout, stderr = finish(proc, timeout, f"fsdp-bench {' '.join(map(str, args))}")
    records = load_records(results)[0] if results is not None and Path(results).exists() else []
    return CliRun(rc, stdout, stderr, records, time.monotonic() - started)


@pytest.fixture(scope="session")
def fsdp_bench():
    """The `run_cli` helper: `rc, out, err, records = fsdp_bench("run", "model=debug", results=tmp_path)`."""
    return run_cli


def leftover_workers(results: Path) -> list[str]:
    """Command lines of torchrun agents and ranks still alive whose arguments point into `results`."""
    alive = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # the process ended while we looked
            continue
        if str(results) in cmdline and ("fsdp_core.worker" in cmdline or "torch.distributed.run" in cmdline):
            alive.append(cmdline)
    return alive


@pytest.fixture(scope="session")
def worker_processes():
    """The `leftover_workers` helper: `assert worker_processes(tmp_path) == []`."""
    return leftover_workers
