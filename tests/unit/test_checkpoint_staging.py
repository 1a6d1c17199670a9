"""Async checkpoints stage into pinned memory through DCP's DefaultStager, tolerantly
(fsdp_core/checkpoint_staging.py): the stager's options per device, one stager reused by every save
where this torch's stager can stage twice and a new one per save where it cannot (torch 2.11's, built
here from the real 2.13 class with the two lines 2.11 adds), and the fall back to pageable memory when
pinning fails. The engine's async saves (tests/distributed/test_checkpoint.py) record the staging and
load back bit-exactly after a save into reused buffers; pinning itself needs CUDA (tests/gpu)."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

from bench.schema.checkpoint import STAGINGS, CheckpointMetrics
from fsdp_core.checkpoint_staging import AsyncStaging, reusable, stages_twice, staging_options

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
# torch/cuda/_pin_memory_utils.py's message when cudaHostRegister fails (error 2: out of memory).
PIN_ERROR = (
    "Registering memory failed with cudaError: 2. It's possible that this is an asynchronous error raised "
    "from a previous cuda operation. Consider launching with CUDA_LAUNCH_BLOCKING=1 to debug."
)


class StagesOnce(DefaultStager):
    """torch 2.11's DefaultStager: its `_stage` ends by closing its StateDictStager (2.11's staging.py),
    which clears the copy dispatch the next stage needs."""

    def _stage(self, state_dict, **kwargs):
        state_dict = super()._stage(state_dict, **kwargs)
        self._state_dict_stager.close()
        return state_dict


def test_the_stager_pins_and_copies_non_blocking_only_on_a_gpu():
    # (pinned, shared, async staging, non-blocking): no shared memory (the upload is a thread), staging
    # synchronous (stage() returns the state: staging_s and blocked_s keep their meaning).
    assert staging_options(CPU) == StagingOptions(False, False, False, False)
    assert staging_options(CUDA) == StagingOptions(True, False, False, True)
    assert staging_options(CUDA, pin=False) == StagingOptions(False, False, False, True)


def test_a_stager_that_stages_once_is_told_apart_and_gets_a_new_stager_per_save():
    once = StagesOnce(StagingOptions(False, False, False, False))
    once.stage({"model": {"w": torch.ones(3)}})
    with pytest.raises(KeyError):  # what an async save on torch 2.11 would raise at its second save
        once.stage({"model": {"w": torch.ones(3)}})
    assert stages_twice(StagesOnce, StagingOptions) is False
    assert stages_twice(DefaultStager, StagingOptions) is True

    staging = AsyncStaging(CPU, 0, reuse=False)
    first = staging.stager()
    staging.staged()
    second = staging.stager()
    assert second is not first and staging.kind == "pageable"
    assert AsyncStaging(CUDA, 0, reuse=False).kind == "pinned-per-save"


@pytest.mark.skipif(not reusable(), reason="this torch's DefaultStager stages once")
def test_one_stager_serves_every_save_and_its_buffers_hold_the_latest_state():
    staging = AsyncStaging(CPU, 0)
    assert staging.kind == "pageable"  # CPU: nothing to pin
    weight = torch.arange(6.0)
    state = {
        "model": {"w": weight},
        "optim": {"state": {0: {"step": torch.tensor(1.0)}}, "param_groups": [{"lr": 0.1}]},
    }
    stager = staging.stager()
    first = stager.stage(state)
    staging.staged()
    weight.add_(1)
    assert staging.stager() is stager
    second = stager.stage(state)
    assert second["model"]["w"].data_ptr() == first["model"]["w"].data_ptr() != weight.data_ptr()
    assert second["model"]["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert second["optim"]["param_groups"] == [{"lr": 0.1}]
    staging.close()
    assert staging.stager() is not stager  # closed: its buffers went with it


def test_a_failed_pin_falls_back_to_pageable_memory_and_says_so(capsys):
    staging = AsyncStaging(CUDA, 3, reuse=True)
    assert staging.kind == "pinned"
    assert not staging.pinning_failed(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert staging.kind == "pinned"
    assert staging.pinning_failed(RuntimeError(PIN_ERROR))
    assert staging.kind == "pinning-failed"
    assert capsys.readouterr().err == (
        "rank 3: checkpoint staging: pinning host memory failed (Registering memory failed with cudaError: 2. "
        "It's possible that this is an asynchronous error raised from a previous cuda operation. Consider "
        "launching with CUDA_LAUNCH_BLOCKING=1 to debug.); staging into pageable memory\n"
    )
    assert not staging.pinning_failed(RuntimeError(PIN_ERROR))  # already pageable: a second failure is real
    assert not AsyncStaging(CPU, 0).pinning_failed(RuntimeError(PIN_ERROR))


def test_the_record_holds_the_most_degraded_staging_last():
    """Ranks agree on the staging by the maximum of its index (fsdp_core/checkpoint.py's summary): a
    rank whose pinning failed must win over the others' pinned."""
    assert STAGINGS[0] == "pinned" and STAGINGS[-1] == "pinning-failed"
    for staging in (*STAGINGS, None):
        assert CheckpointMetrics(mode="async", every=1, dir="d", staging=staging).staging == staging
    with pytest.raises(ValueError, match="staging"):
        CheckpointMetrics(mode="async", every=1, dir="d", staging="unpinned")


def test_a_save_with_its_own_stager_keeps_the_writer_from_copying_ahead(monkeypatch, tmp_path):
    # With a stager of its own, the writer would otherwise copy ahead from the device in its upload
    # thread, synchronising that thread's current GPU (0) with the training loop every 10 MB.
    import types

    import fsdp_core.checkpoint as checkpoint

    saves = []
    monkeypatch.setattr(checkpoint.dcp, "async_save", lambda state, **kwargs: saves.append(kwargs) or "upload")
    owner = types.SimpleNamespace(_staging=AsyncStaging(CPU, rank=0), group="checkpoint group")
    assert checkpoint.Checkpointer._stage_and_upload(owner, {"w": torch.ones(2)}, str(tmp_path / "step")) == "upload"
    (kwargs,) = saves
    assert kwargs["async_stager"] is owner._staging.stager() and kwargs["process_group"] == "checkpoint group"
    assert kwargs["storage_writer"].per_thread_copy_ahead == 0
    # Without a stager (a torch without DefaultStager) the writer stages, and turns copying ahead off itself.
    plain = checkpoint.writer(str(tmp_path / "step"))
    assert plain.per_thread_copy_ahead == 10_000_000
