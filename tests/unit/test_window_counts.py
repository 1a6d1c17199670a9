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


class FakeAllocator:
    """Stands in for torch.cuda's allocator functions (no GPU here; torch.distributed is untouched):
    records the order of the calls and answers a retry counter that the test moves."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.retries = 3  # init and warm-up already retried three times

    def install(self, monkeypatch) -> None:
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "synchronize", lambda device=None: self.calls.append("synchronize"))
        monkeypatch.setattr(cuda, "empty_cache", lambda: self.calls.append("empty_cache"))
        monkeypatch.setattr(cuda, "reset_peak_memory_stats", lambda device=None: self.calls.append("reset_peaks"))
        monkeypatch.setattr(cuda, "memory_stats", lambda device=None: {"num_alloc_retries": self.retries})
        monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: 100)
        monkeypatch.setattr(cuda, "max_memory_reserved", lambda device=None: 200)
        monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: (700, 1000))


def test_the_window_opens_after_a_sync_with_the_cache_released_before_the_peak_reset(monkeypatch):
    from fsdp_core.train import start_timed_window

    fake = FakeAllocator()
    fake.install(monkeypatch)
    cuda = torch.device("cuda", 0)
    _, at_start = start_timed_window(cuda)
    # The sync first (no queued warm-up kernel still uses a cached block), then the cache released,
    # then the peaks moved to what the timed steps start from.
    assert fake.calls == ["synchronize", "empty_cache", "reset_peaks"]
    assert at_start == {"alloc_retries": 3}
    fake.retries = 5  # two retries inside the window
    snapshot = memory_snapshot(cuda, at_start)
    assert snapshot == {"allocated": 100, "reserved": 200, "device_used": 300, "alloc_retries": 2}
