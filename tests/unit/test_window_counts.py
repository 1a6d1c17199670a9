"""The timed window's own allocator counts (fsdp_core/metrics.py): the CUDA allocator's counters
accumulate from the start of the process (a peak reset leaves them), so the window's count is the
difference of its readings; on CPU there is no such counter. What only CUDA shows (the cache released
before the peak reset, a real retry count) is in tests/gpu/test_gpu_memory_checkpoint.py."""

from __future__ import annotations

import torch

from fsdp_core.metrics import allocator_counts, memory_snapshot, reset_peak_memory, window_count

CPU = torch.device("cpu")


def test_a_window_counts_the_increase_between_its_readings():
    assert window_count(7, 3) == 4  # 3 retries before the window (init, warm-up, an earlier point): not its own
    assert window_count(3, 3) == 0
    assert window_count(5, None) == 5  # no reading at the start: counted from zero
    assert window_count(None, 3) is None  # nothing counted (CPU)


def test_a_cpu_rank_has_no_allocator_counters_and_records_none():
    assert allocator_counts(CPU) == {}
    at_start = reset_peak_memory(CPU)
    assert at_start == {}
    snapshot = memory_snapshot(CPU, at_start)
    assert snapshot["alloc_retries"] is None and snapshot["reserved"] is None
    assert snapshot["allocated"] > 0  # the process's peak resident set size
