"""bench/analysis/helper_threads.py, in fresh interpreters: set before numpy and pyarrow load, the
process has no thread but its own; a user's setting is kept; once numpy is loaded, it is left alone.
bench/analysis/heap.py's Arrow pool is checked here too: Arrow then allocates by malloc."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.analysis.heap import ARROW_POOL_VARIABLE
from bench.analysis.helper_threads import ARROW_JEMALLOC_VARIABLE, BLAS_THREADS_VARIABLE

CODE = (
    "import os, sys\n"
    "from bench.analysis.heap import keep_freed_memory\n"
    "from bench.analysis.helper_threads import no_helper_threads\n"
    "keep_freed_memory()\n"
    "print(','.join(no_helper_threads()) or '-')\n"
    "import numpy, pyarrow, pandas\n"
    "pandas.Series(['a', 'b'] * 1000).str.upper()\n"
    "numpy.ones((300, 300)) @ numpy.ones((300, 300))\n"  # big enough for OpenBLAS to use its threads
    "print(len(os.listdir('/proc/self/task')), pyarrow.default_memory_pool().backend_name)\n"
)
OURS = (BLAS_THREADS_VARIABLE, ARROW_JEMALLOC_VARIABLE, ARROW_POOL_VARIABLE)


def _run(code: str, env_extra: dict[str, str]) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key not in OURS} | env_extra
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads counted in /proc")
def test_before_the_libraries_load_the_process_keeps_one_thread_and_arrow_uses_malloc():
    assert _run(CODE, {}) == [f"{BLAS_THREADS_VARIABLE},{ARROW_JEMALLOC_VARIABLE}", "1", "system"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads counted in /proc")
def test_without_them_the_libraries_start_threads_of_their_own():
    # The control: what the settings remove is there without them (two cores or more).
    code = "import os, numpy, pyarrow\nnumpy.ones((300, 300)) @ numpy.ones((300, 300))\n"
    code += "print(len(os.listdir('/proc/self/task')), pyarrow.default_memory_pool().backend_name)\n"
    threads, pool = _run(code, {})
    assert int(threads) > 1 and pool != "system"


def test_a_users_settings_are_kept():
    env = {BLAS_THREADS_VARIABLE: "2", ARROW_JEMALLOC_VARIABLE: "narenas:1", ARROW_POOL_VARIABLE: "jemalloc"}
    code = CODE.replace("print(len(os.listdir('/proc/self/task')), ", "print(")
    code += f"print(os.environ['{BLAS_THREADS_VARIABLE}'], os.environ['{ARROW_JEMALLOC_VARIABLE}'])\n"
    assert _run(code, env) == ["-", "jemalloc", "2", "narenas:1"]


def test_once_numpy_is_loaded_its_setting_is_left_alone():
    code = "import os, numpy\nfrom bench.analysis.helper_threads import no_helper_threads\n"
    code += f"print(','.join(no_helper_threads()), os.environ.get('{BLAS_THREADS_VARIABLE}'))\n"
    assert _run(code, {}) == [ARROW_JEMALLOC_VARIABLE, "None"]
