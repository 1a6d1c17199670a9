"""The command line tests run: the installed console script next to this interpreter, `python -m bench`
where it is missing. A module of its own, not conftest: with several conftest.py files on the path,
`from conftest import` names whichever one was imported first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(sys.executable).with_name("fsdp-bench")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "bench"]


def finish(proc: subprocess.Popen, timeout: float = 240, what: str = "fsdp-bench") -> tuple[int, str, str]:
    """(rc, stdout, stderr) of an `fsdp-bench` started in its own session; past the timeout its
    whole process group is killed and the test fails with what it printed."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{what} ran past {timeout} s\n{out}\n{err}")
    return proc.returncode, out, err
