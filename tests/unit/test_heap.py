"""bench/analysis/heap.py: the report command's allocator settings, taken in a fresh interpreter (glibc's
mallopt answers 1 to each; numpy asked for no huge pages, unless the user said otherwise)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

CODE = (
    "import os, sys\n"
    "from bench.analysis.heap import NUMPY_HUGEPAGE_VARIABLE, keep_freed_memory\n"
    "taken = keep_freed_memory()\n"
    "import numpy\n"
    "print(taken, os.environ.get(NUMPY_HUGEPAGE_VARIABLE), 'numpy' in sys.modules)\n"
)


def _run(env_extra: dict[str, str]) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "NUMPY_MADVISE_HUGEPAGE"} | env_extra
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_settings_are_taken_before_numpy_is_imported():
    assert _run({}) == ["True", "0", "True"]


def test_a_users_numpy_setting_is_kept():
    assert _run({"NUMPY_MADVISE_HUGEPAGE": "1"})[1:] == ["1", "True"]


def test_numpy_imported_before_is_switched_by_its_own_switch():
    code = (
        "import os, numpy\n"
        "from bench.analysis.heap import keep_freed_memory\n"
        "switch = numpy._core.multiarray._set_madvise_hugepage\n"
        "switch(True)\n"
        "keep_freed_memory()\n"
        "print(switch(True), os.environ.get('NUMPY_MADVISE_HUGEPAGE'))\n"  # the state it left: off
    )
    env = {key: value for key, value in os.environ.items() if key != "NUMPY_MADVISE_HUGEPAGE"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "None"]
