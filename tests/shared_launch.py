"""Launches shared by the tests of one session: starting ranks is the expensive part of the suite.

`once_per_session(tmp_path_factory, name, compute)` runs compute() once per test session, also when
pytest-xdist spreads the files that use it over several workers. `session_results(tmp_path_factory,
name, launch)` is its form for a results folder: launch(folder) once (an `fsdp-bench sweep` into
it, say), the folder for every test that asks. Tests only read such a folder (a copy where they
must change it): other tests, maybe on the other worker, read it too.

A module of its own, not conftest: tests/distributed and tests/e2e both use it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

# The default sweep as this project's CI runs it (tests/e2e/test_ci_baseline.py), 12 points in two
# launches: one session's sweep serves every test that needs real records of its kind. The fixture
# that calls it stays in each test file, where tests/unit/test_markers.py sees the launch.
CPU_SMOKE_SWEEP = ("sweep", "experiment=cpu_smoke", "report=false")


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    compute: Callable[[], T],
    dump: Callable[[T], str] = json.dumps,
    load: Callable[[str], T] = json.loads,
) -> T:
    """compute() once per test session: the first pytest-xdist worker to ask runs it and leaves
    dump(result) in the session's shared temporary folder; the others wait for it and load that.

    Session fixtures are per worker, and `--dist loadfile` hands the files sharing one to different
    workers: without this, each of them would start the same ranks again. A worker whose compute()
    fails leaves nothing, so the next one tries (and reports) for itself.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return compute()
    shared = tmp_path_factory.getbasetemp().parent  # every worker's basetemp lies in it
    result = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if compute() fails
        if result.exists():
            return load(result.read_text())
        value = compute()
        partial = result.with_suffix(".partial")
        partial.write_text(dump(value))
        partial.replace(result)
        return value


def session_results(tmp_path_factory: pytest.TempPathFactory, name: str, launch: Callable[[Path], object]) -> Path:
    """A results folder that `launch(folder)` filled, once per test session (see `once_per_session`).

    `launch` returns what ran (a tests/bench_cli.py `CliRun`): a non-zero exit fails the test that
    asked first, with what the command printed, and leaves nothing for the next one to trust. The
    fixtures that ask are each test file's own (module fixtures are per file): this process keeps
    the folder, so that without xdist too the files share one launch."""
    if name in _RESULTS:
        return _RESULTS[name]

    def compute() -> str:
        results = tmp_path_factory.mktemp(name) / "results"
        run = launch(results)
        assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
        return str(results)

    _RESULTS[name] = Path(once_per_session(tmp_path_factory, name, compute))
    return _RESULTS[name]


_RESULTS: dict[str, Path] = {}  # session_results' folders, by name, in this process
