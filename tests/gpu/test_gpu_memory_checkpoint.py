"""What only CUDA shows of the timed window's memory and of a checkpoint's clocks (marked `gpu`:
skipped where no NVIDIA GPU is visible). One process on GPU 0 (gpu_memory_checkpoint_job.py):

- the allocator's cache is released before the peak reset, so a window's reserved peak is what its
  own steps hold, not the 4 GiB cached before it (fsdp_core/metrics.py reset_peak_memory);
- alloc_retries is the window's own count;
- a save or a load issued right after ~1 s of queued kernels is not charged for them (the clocks
  start after a device synchronisation: fsdp_core/checkpoint.py), and async saves stage into pinned
  memory (fsdp_core/checkpoint_staging.py).
The CPU side of the same logic: tests/unit/test_window_counts.py, tests/unit/test_checkpoint_staging.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GIB = 2**30


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu_memory_checkpoint")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(HERE / "gpu_memory_checkpoint_job.py"), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((out / "report.json").read_text())


def test_the_window_reserves_only_what_its_own_steps_hold(report):
    memory = report["memory"]
    assert memory["reserved_before_window"] >= 4 * GIB  # the cache the allocator kept
    assert 0 < memory["allocated"] <= memory["reserved"] < GIB  # released before the reset
    assert memory["alloc_retries"] == 0 and memory["at_start"]["alloc_retries"] >= 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_save_and_a_load_are_not_charged_for_queued_kernels(report, mode):
    run = report[mode]
    section, calls = run["section"], run["calls_s"]
    assert [s["step"] for s in section["saves"]] == [0, 1]
    for save, call in zip(section["saves"], calls):
        assert call >= 0.9  # the call waited for the queued second of kernels ...
        assert save["blocked_s"] < call - 0.8  # ... outside the save's own clock
    assert calls[2] >= 0.9 and section["load"]["load_s"] < calls[2] - 0.8
    if mode == "async":
        assert section["staging"] == ("pinned" if report["reusable"] else "pinned-per-save")
        assert all(s["staging_s"] <= s["blocked_s"] for s in section["saves"])
    else:
        assert section["staging"] is None
