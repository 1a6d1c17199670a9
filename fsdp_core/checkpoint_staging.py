"""Where an async checkpoint stages the state in host memory: DCP's DefaultStager, into pinned memory
on a GPU, tolerant of the torch versions the engine meets.

Without a stager of its own, `dcp.async_save` has the file system writer stage the state: a new
pageable host copy of the whole state at every save, which the device copies into at pageable speed.
`AsyncStaging` gives one checkpointer one `DefaultStager` instead, with
- pinned memory on CUDA (on CPU torch ignores the flag with a warning: nothing to pin, so not asked);
- no shared memory (the upload runs in a thread of this process, not another process);
- synchronous staging: `stage()` returns the staged state, so `staging_s` and `blocked_s` keep their
  meaning and `async_save` returns the upload's plain Future (with async staging it returns an
  AsyncSaveResponse and the copy runs beside training);
- non-blocking device copies on CUDA only (DefaultStager asserts an accelerator for them; it then
  synchronises the device before `stage()` returns, so the staged copy is complete).
Its buffers are cached per source storage and reused by the next save (torch 2.13), which overwrites
the previous staged copy: safe because a checkpointer stages only after the save in flight is
durable (fsdp_core/checkpoint.py's `_save_async` waits first).

Versions: torch 2.11's DefaultStager closes its StateDictStager after every stage, and a second
stage on it raises `KeyError: <class 'type'>` (its copy dispatch table was cleared): `reusable()`
probes this once per process, and where the stager cannot stage twice each save gets a new one
(new pinned buffers each save: `pinned-per-save`). A torch without DefaultStager leaves staging to
the writer (`writer`). Pinning a full copy of the state can fail (cudaHostRegister: not enough
host memory may be page-locked; a 7B model's fp32 weights and AdamW moments are ~81 GB): the save
is then staged again into pageable memory, and so are the later ones (`pinning-failed`). The names
are the record's `metrics.checkpoint.staging` (bench.schema.checkpoint.Staging).
"""

from __future__ import annotations

import functools
import sys

import torch

from bench.schema.checkpoint import Staging

# What torch raises when cudaHostRegister fails (torch/cuda/_pin_memory_utils.py, 2.11 and 2.13 alike).
PIN_FAILURE = "Registering memory failed"


@functools.cache
def stager_classes():
    """(DefaultStager, StagingOptions), or None where this torch has no DefaultStager."""
    try:
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
    except ImportError:
        return None
    return DefaultStager, StagingOptions


def staging_options(device: torch.device, pin: bool = True):
    """The StagingOptions of a checkpointer's stager on `device` (see the module docstring); `pin`
    False: pageable even on a GPU (after pinning failed)."""
    _, options = stager_classes()
    cuda = device.type == "cuda"
    return options(
        use_pinned_memory=cuda and pin, use_shared_memory=False, use_async_staging=False, use_non_blocking_copy=cuda
    )


@functools.cache
def reusable() -> bool:
    """Whether this torch's DefaultStager can stage twice, probed once per process."""
    classes = stager_classes()
    return classes is not None and stages_twice(*classes)


def stages_twice(stager_class, options_class) -> bool:
    """Whether one stager of `stager_class` stages twice (torch 2.11's DefaultStager clears its copy
    dispatch after each stage: the second raises KeyError), probed on one that pins and copies nothing."""
    probe = stager_class(options_class(False, False, False, False))
    try:
        probe.stage({"probe": [1]})
        probe.stage({"probe": [1]})
        return True
    except Exception:  # noqa: BLE001 - whatever a second stage raises, a new stager per save is always right
        return False
    finally:
        probe.close()


class AsyncStaging:
    """One checkpointer's staging of its async saves: the stager each save passes to `dcp.async_save`
    (None: the writer stages) and the record's name for what it did."""

    def __init__(self, device: torch.device, rank: int, reuse: bool | None = None) -> None:
        """`reuse`: whether one stager serves every save (None: as this torch's stager allows, `reusable`)."""
        self.device, self.rank = device, rank
        self._reuse = reusable() if reuse is None else reuse
        self._pin = device.type == "cuda"
        self._failed = False
        self._stager = None

    @property
    def kind(self) -> Staging:
        if stager_classes() is None:
            return "writer"
        if self._failed:
            return "pinning-failed"
        if not self._pin:
            return "pageable"
        return "pinned" if self._reuse else "pinned-per-save"

    def stager(self):
        """The stager for the next save: this checkpointer's one, or a new one where a stager stages once."""
        classes = stager_classes()
        if classes is None:
            return None
        if self._stager is None:
            stager_class, _ = classes
            self._stager = stager_class(staging_options(self.device, self._pin))
        return self._stager

    def staged(self) -> None:
        """After a save has staged: a stager that stages once is closed (its copy lives on in the upload)."""
        if not self._reuse:
            self.close()

    def pinning_failed(self, exc: BaseException) -> bool:
        """Whether `exc` (raised by a save's staging) is a failure to pin host memory; if so, this and
        the later saves stage into pageable memory (the partly pinned copy is released), and the
        rank's log says why."""
        if not self._pin or PIN_FAILURE not in str(exc):
            return False
        self.close()
        self._pin, self._failed = False, True
        reason = str(exc).strip().splitlines()[0]
        print(f"rank {self.rank}: checkpoint staging: pinning host memory failed ({reason}); "
              "staging into pageable memory", file=sys.stderr, flush=True)  # fmt: skip
        return True

    def close(self) -> None:
        """Release the stager's buffers (pinned memory is unpinned when its storage goes)."""
        stager, self._stager = self._stager, None
        if stager is not None:
            stager.close()
