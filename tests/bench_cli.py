"""The one way tests run `fsdp-bench`, in one of two modes.

- **in-process** (`in_process`): `bench.cli.main.main(argv)`, the console script's own code, with
  stdout and stderr captured and the exit code returned (argparse's exits included); the working
  folder and the environment are set for the call and restored after it, so a command that
  changes either (`--config-dir` joins FSDP_BENCH_CONFIG_DIR) leaves nothing behind. For commands
  that start no ranks: `report`, `check`, `baseline`, `store`, `history`, `plan`, `calibrate
  --from-preflight`, and `cancel` of a folder nobody holds. It saves a fresh interpreter's start-up
  (about a second of CPU) per call.
- **a separate process** (`separate`, `start` + `finish`): the console script next to this
  interpreter (`python -m bench` where it is missing), in its own session; past its timeout the whole
  process group is killed and the test fails with what it printed. For commands that start ranks
  (`run`, `sweep`, `preflight`, `ab`, `calibrate`), and for whatever must be a process of its own:
  signals, parent death, locks, an environment without some tool.

`fsdp_bench(*args)` picks the mode from the command (`starts_no_ranks`); `separate=True` forces a
process. Every call returns a `CliRun`, which unpacks as (rc, stdout, stderr, records), records
being every valid result.json under `results`.

A module of its own, not conftest: with several conftest.py files on the path, `from conftest
import` names whichever one was imported first.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench.analysis.records import load_records
from bench.schema.record import RunResult

_SCRIPT = Path(sys.executable).with_name("fsdp-bench")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "bench"]

# Commands that never start a rank, an agent or a service: run in this process by default.
NO_RANKS = frozenset({"report", "check", "baseline", "store", "history", "plan"})


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


def starts_no_ranks(args: Sequence[object]) -> bool:
    """Whether `fsdp-bench ARGS` can run in this process: its command starts no ranks."""
    words = [str(a) for a in args]
    command = next((w for w in words if not w.startswith("-")), "")
    return command in NO_RANKS or (command == "calibrate" and "--from-preflight" in words)


def fsdp_bench(
    *args: object,
    results: Path | None = None,
    timeout: float = 180.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    separate: bool | None = None,
) -> CliRun:
    """`fsdp-bench ARGS`: in this process when its command starts no ranks (unless `separate`),
    else as a process of its own. `env` replaces the environment for the call, `cwd` the folder."""
    if separate is None:
        separate = not starts_no_ranks(args)
    if separate:
        return run_separately(*args, results=results, timeout=timeout, env=env, cwd=cwd)
    return in_process(*args, results=results, env=env, cwd=cwd)


def in_process(
    *args: object, results: Path | None = None, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> CliRun:
    """`bench.cli.main.main(ARGS)` here, output captured; cwd and os.environ as they were afterwards."""
    from bench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    started = time.monotonic()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main([str(a) for a in args])
            except SystemExit as exc:  # argparse's usage errors and --help/--version
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return CliRun(rc, out.getvalue(), err.getvalue(), _records(results), time.monotonic() - started)


def start(
    *args: object,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    program: Sequence[object] = CLI,
    merge_stderr: bool = False,
    signals: Sequence[signal.Signals] = (),
) -> subprocess.Popen:
    """`fsdp-bench ARGS` (or another `program`) in the background, in its own session (a process group
    `finish` can kill); stderr into stdout with `merge_stderr`.

    `signals`: those a test sends it, which it then starts with at their default action, as from a
    terminal, so that they stop it as they stop a user's: a shell's background job (`pytest ... &`)
    ignores SIGINT and `nohup make test` ignores SIGHUP, and children inherit both (the sweep keeps
    an ignored SIGHUP ignored, as `nohup fsdp-bench sweep` asks)."""
    return subprocess.Popen(
        [*map(str, program), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
        preexec_fn=(lambda: _default_actions(signals)) if signals else None,
    )


def _default_actions(signals: Sequence[signal.Signals]) -> None:
    """In the child before it execs: these signals back to their default action (an ignored signal
    stays ignored across exec)."""
    for sig in signals:
        signal.signal(sig, signal.SIG_DFL)


def finish(proc: subprocess.Popen, timeout: float = 240, what: str = "fsdp-bench") -> tuple[int, str, str]:
    """(rc, stdout, stderr) of a process `start` began; past the timeout its whole process group is
    killed and the test fails with what it printed."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{what} ran past {timeout} s\n{out}\n{err}")
    return proc.returncode, out, err or ""


def run_separately(
    *args: object,
    results: Path | None = None,
    timeout: float = 180.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    program: Sequence[object] = CLI,
) -> CliRun:
    """`fsdp-bench ARGS` as a process of its own, waited for (see `finish`)."""
    started = time.monotonic()
    proc = start(*args, env=env, cwd=cwd, program=program)
    rc, out, err = finish(proc, timeout, f"fsdp-bench {' '.join(map(str, args))}")
    return CliRun(rc, out, err, _records(results), time.monotonic() - started)


def _records(results: Path | None) -> list[RunResult]:
    return load_records(results)[0] if results is not None and Path(results).exists() else []
