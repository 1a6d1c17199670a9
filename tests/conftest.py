"""Fixtures shared by every test folder.

`fsdp_bench` runs the console script (tests/bench_cli.py: in this process for commands that start
no ranks, else a process in its own session, killed with everything it started if it outlives its
timeout) and returns (rc, stdout, stderr, records), records being every valid result.json under
the results folder it was pointed at.
`worker_processes` lists rank and agent processes still alive that belong to a results folder.
Every test holds a share of the machine; a timing-sensitive block takes it alone (tests/alone.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import bench_cli
import pytest
from alone import share_of_the_machine

from bench.config.paths import CACHE_DIR_VARIABLE

# Each test file's measured seconds in a whole-suite run (scripts/update_test_costs.py writes it).
FILE_COSTS = Path(__file__).with_name("file_costs.json")
# A file the table does not know yet: a rough cost by its tests' markers, in seconds on 2 cores.
COST_S = {"slow": 30.0, "ranks": 8.0}


def pytest_collection_modifyitems(config, items):
    """The costliest files first, so that `--dist loadfile` hands them out at the start and the
    workers end together (a 60 s file handed out last keeps one worker busy alone); then `gpu`
    tests skipped, with the reason, where no NVIDIA GPU is visible."""
    measured = json.loads(FILE_COSTS.read_text()) if FILE_COSTS.exists() else {}
    functions: dict[str, float] = {}  # a parametrized test's cases share their launches: once each
    for item in items:
        mark = next((m for m in COST_S if item.get_closest_marker(m)), None)
        functions[item.nodeid.split("[")[0]] = COST_S.get(mark, 0.1)
    guessed: dict[str, float] = {}
    for function, seconds in functions.items():
        guessed[function.split("::")[0]] = guessed.get(function.split("::")[0], 0.0) + seconds
    cost = {path: measured.get(path, seconds) for path, seconds in guessed.items()}
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])  # stable: a file's own order stays
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi finds none)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of each test under the suite's shared lock (tests/alone.py)."""
    with share_of_the_machine():
        yield


# Tests run sweeps side by side (several xdist workers): they skip the host lock, as a CI job running
# several benchmarks at once would; tests/e2e/test_locks.py clears this to test the lock itself.
os.environ.setdefault("FSDP_BENCH_ALLOW_CONCURRENT", "1")


@pytest.fixture(scope="session")
def fsdp_bench():
    """bench_cli.fsdp_bench: `rc, out, err, records = fsdp_bench("run", "model=debug", results=tmp_path)`
    (a process for commands that start ranks, this process for the others)."""
    return bench_cli.fsdp_bench


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


# What the commands keep between runs (the report's kept rows, bench/analysis/report/digest_cache.py)
# goes to a folder of this test process's own, never the user's cache (nor one the user set): a test's
# report reads what its own earlier reports kept, and nothing is left behind.
os.environ[CACHE_DIR_VARIABLE] = tempfile.mkdtemp(prefix="fsdp-bench-cache-")
atexit.register(shutil.rmtree, os.environ[CACHE_DIR_VARIABLE], True)
