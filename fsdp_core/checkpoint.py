"""Checkpointing as a measured part of training: DCP saves (sync or async), resume, and a timed load.

The state is FSDP2's sharded model and AdamW state dicts, taken and restored with
`torch.distributed.checkpoint.state_dict.get_state_dict`/`set_state_dict` (DTensor shards: each
rank writes only its own shards; DCP writes a replicated tensor once). Saves go through DCP's file
system writer, or for a URL (`s3://...`, `file://...`) the fsspec writer DCP picks from it, each into a new step
folder; rank 0 writes the marker (bench/schema/protocol.py's layout) after the save is durable, so a
save that fails part-way never hides the previous checkpoint.

Timing (each rank's own view; the worker takes the maximum over ranks; on a GPU each save's and
load's clock starts, and a load's stops, after a device synchronisation, so no save is charged for
the last step's queued kernels, which its device-to-host copies would wait for):
- sync: the loop is blocked for the whole save (planning, writing, fsync, metadata).
- async (`dcp.async_save`): the loop is blocked while the previous save, if still running, finishes
  (one save in flight, as DCP's staging memory allows) and while the state is staged into host
  memory (pinned on a GPU, one set of buffers reused by every save: fsdp_core/checkpoint_staging.py);
  the write runs in DCP's background thread. It uses a gloo group of its own: its
  collectives must never interleave with the training loop's on the same group.
- `durable_s`: from the save's start until every rank's files and the metadata are written.
- `bookkeeping_s`: after a save is durable, walking DCP's metadata for the bytes each rank wrote
  and telling the listener (Ray's report). It runs inside the timed window, outside the step times
  and outside `blocked_s` (an async save's bookkeeping, done when the next save waits for it, is
  taken out of that save's blocked time), so it is counted on its own.

The settings are the point's `train` section (bench.schema.spec.TrainSpec: mode, interval, resume);
only the folder is resolved (bench.schema.protocol.checkpoint_location). Rank 0 writes or removes the
marker, and prunes step folders, only while the launch is still owned (fsdp_core/lifeline.py).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from bench.schema.checkpoint import STAGINGS, CheckpointLoad, CheckpointMetrics, CheckpointSave, write_bandwidth
from bench.schema.files import write_text_atomic
from bench.schema.protocol import (
    CHECKPOINT_MARKER,
    CHECKPOINT_STEP_PREFIX,
    DCP_METADATA_FILE,
    CheckpointMarker,
    checkpoint_folder,
    is_url,
    read_local_marker,
)
from bench.schema.record import Metrics
from bench.schema.spec import TrainSpec
from fsdp_core.checkpoint_staging import AsyncStaging
from fsdp_core.lifeline import check_owned
from fsdp_core.metrics import synchronize


class CheckpointListener(Protocol):
    """Told about every durable checkpoint; may name one to restore from (Ray Train's checkpoint API)."""

    def on_durable(self, step: int, location: str, point_id: str) -> None: ...

    def restore_location(self, point_id: str) -> str | None: ...


_LISTENER: CheckpointListener | None = None


def set_listener(listener: CheckpointListener | None) -> None:
    """Install the launcher's listener for this process (None: no listener)."""
    global _LISTENER
    _LISTENER = listener


_GROUP: dist.ProcessGroup | None = None


def checkpoint_group(timeout) -> dist.ProcessGroup:
    """The gloo group DCP coordinates on, built once per process (every rank calls this in the same
    order), with this point's collective timeout (a launch's points may have different ones)."""
    global _GROUP
    if _GROUP is None:
        _GROUP = dist.new_group(backend="gloo", timeout=timeout)
    elif hasattr(_GROUP, "set_timeout"):
        _GROUP.set_timeout(timeout)
    return _GROUP


# ---- storage: local paths through the file system writer, URLs through fsspec ----


def join(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}" if is_url(location) else str(Path(location) / name)


def writer(location: str, **options) -> dcp.FileSystemWriter | None:
    """DCP's file system writer for a local step folder, with `options` (per_thread_copy_ahead); None
    for a URL, whose writer DCP picks itself from the checkpoint_id (its fsspec writer: no public way
    to construct it, so it keeps its defaults, copying ahead included)."""
    return None if is_url(location) else dcp.FileSystemWriter(location, sync_files=True, **options)


def reader(location: str) -> dcp.FileSystemReader | None:
    """DCP's file system reader for a local step folder; None for a URL (DCP picks its fsspec reader)."""
    return None if is_url(location) else dcp.FileSystemReader(location)


def _fs(location: str):
    import fsspec

    return fsspec.core.url_to_fs(location)


def read_marker(directory: str) -> CheckpointMarker | None:
    """The latest complete checkpoint of `directory` (None when there is none)."""
    if not is_url(directory):
        return read_local_marker(directory)
    fs, path = _fs(directory)
    try:
        marker = CheckpointMarker.from_json(fs.cat_file(f"{path}/{CHECKPOINT_MARKER}").decode())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return marker if fs.exists(f"{path}/{marker.folder}/{DCP_METADATA_FILE}") else None


def write_marker(directory: str, marker: CheckpointMarker) -> None:
    """Replace the marker atomically (temporary file + rename), durably on a local file system
    (bench/schema/files.py); at a URL, an object store's put is whole and the rename moves it. Only
    while this rank's launch is owned (a rerun may own the folder now: LaunchAbandoned)."""
    check_owned()
    if is_url(directory):
        fs, path = _fs(directory)
        tmp = f"{path}/.{CHECKPOINT_MARKER}.{os.getpid()}.tmp"
        fs.pipe_file(tmp, marker.to_json().encode())
        fs.mv(tmp, f"{path}/{CHECKPOINT_MARKER}")
        return
    write_text_atomic(Path(directory) / CHECKPOINT_MARKER, marker.to_json())


def remove_marker(directory: str) -> None:
    check_owned()  # as write_marker: never another run's marker
    if is_url(directory):
        fs, path = _fs(directory)
        if fs.exists(f"{path}/{CHECKPOINT_MARKER}"):
            fs.rm_file(f"{path}/{CHECKPOINT_MARKER}")
        return
    (Path(directory) / CHECKPOINT_MARKER).unlink(missing_ok=True)


def file_size(location: str) -> int:
    if is_url(location):
        fs, path = _fs(location)
        return int(fs.size(path))
    return os.path.getsize(location)


def folder_bytes(location: str) -> int:
    """Bytes of every file in a step folder (what a load reads)."""
    if is_url(location):
        fs, path = _fs(location)
        return int(fs.du(path, total=True))
    return sum(entry.stat().st_size for entry in os.scandir(location) if entry.is_file())


def step_folders(directory: str) -> list[str]:
    """Step folders present in `directory`, oldest first."""
    if is_url(directory):
        fs, path = _fs(directory)
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)] if fs.exists(path) else []
    else:
        names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(n for n in names if n.startswith(CHECKPOINT_STEP_PREFIX))


def remove_folder(location: str) -> None:
    if is_url(location):
        fs, path = _fs(location)
        fs.rm(path, recursive=True)
    else:
        shutil.rmtree(location, ignore_errors=True)


# ---- what a save wrote, from DCP's metadata ----


def written_bytes(metadata: Metadata, world_size: int) -> tuple[list[int], list[int]]:
    """(file bytes, tensor bytes) each rank wrote: DCP's storage index names the file (`__<rank>_<n>.distcp`)
    and length of every item; tensor bytes count the chunks' elements alone (no serialization framing)."""
    files, tensors = [0] * world_size, [0] * world_size
    for index, info in metadata.storage_data.items():
        rank = int(info.relative_path[2:].split("_", 1)[0])
        files[rank] += info.length
        meta = metadata.state_dict_metadata[index.fqn]
        if isinstance(meta, TensorStorageMetadata):
            chunk = next(c for c in meta.chunks if tuple(c.offsets) == tuple(index.offset))
            tensors[rank] += chunk.sizes.numel() * meta.properties.dtype.itemsize
    return files, tensors


@dataclass
class SaveRecord:
    """One save as this rank saw it (the record's CheckpointSave takes the slowest rank's times)."""

    step: int
    blocked_s: float
    durable_s: float
    staging_s: float | None
    bytes_per_rank: list[int]
    metadata_bytes: int
    state_bytes_per_rank: list[int]
    bookkeeping_s: float = 0.0


@dataclass
class LoadRecord:
    step: int
    load_s: float
    bytes: int


@dataclass
class _InFlight:
    step: int
    future: object
    started: float
    staging_s: float
    blocked_s: float
    done_at: list[float] = field(default_factory=list)
    marked: threading.Event = field(default_factory=threading.Event)
    # What marking the save raised in DCP's writer thread (a launch no longer owned): raised by wait().
    error: BaseException | None = None


class Checkpointer:
    """Saves every train.save_interval timed steps into `directory`, resumes before the loop and
    measures a load after it. `device` is the rank's compute device (under CPU offload too, where the
    state lives on the host but the steps' kernels run on the GPU): its queued work is waited for
    outside the checkpoint's clocks."""

    def __init__(
        self, train: TrainSpec, directory: str, point_id: str, model, optimizer, scaler, timeout, device: torch.device
    ) -> None:
        self.train, self.directory, self.point_id = train, directory, point_id
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.device = device
        self.group = checkpoint_group(timeout)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self._staging = AsyncStaging(device, self.rank) if train.checkpoint == "async" else None
        self.saves: list[SaveRecord] = []
        self.resumed: LoadRecord | None = None
        self.load: LoadRecord | None = None
        self._in_flight: _InFlight | None = None

    @property
    def mode(self) -> str:
        return self.train.checkpoint

    # -- state --

    def state(self) -> dict:
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        state = {"model": model_state, "optim": optim_state}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_from(self, location: str) -> float:
        """Load a step folder into the model and optimizer (resharding as needed); returns the seconds it
        took, from after the device's queued work (a resume follows initialisation's kernels) until its
        own copies into the device's tensors (set_state_dict queues them) are done."""
        synchronize(self.device)
        started = time.perf_counter()
        state = self.state()
        dcp.load(state, checkpoint_id=location, storage_reader=reader(location), process_group=self.group)
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        synchronize(self.device)
        return time.perf_counter() - started

    def agreed_marker(self) -> CheckpointMarker | None:
        """The marker as rank 0 reads it, on every rank. Rank 0 writes the marker; another rank could
        read it a moment before rank 0 marks the last save, and load (or list) a different step."""
        box = [read_marker(self.directory) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    # -- before the loop --

    def start(self, restarted: bool = False) -> int:
        """The first step to run: after the restored checkpoint, or 0 (a fresh run drops a stale marker).

        `restarted`: a later attempt at the point after a failure (fsdp_core/job.py): it resumes from the
        latest complete checkpoint, or starts at 0 where the failure came before the first save."""
        location = _LISTENER.restore_location(self.point_id) if _LISTENER else None
        if location is None and (self.train.resume or restarted):
            marker = self.agreed_marker()
            if marker is None and not restarted:
                raise RuntimeError(
                    f"train.resume: no complete checkpoint in {self.directory} "
                    f"(no '{CHECKPOINT_MARKER}' marker naming a step folder with DCP metadata)"
                )
            # A restart that failed before its first save has nothing to resume from: it starts at 0.
            location = join(self.directory, marker.folder) if marker is not None else None
        if location is None:
            if self.mode != "none" and self.rank == 0:
                self._prepare_fresh_dir()
            return 0
        step = _step_of(location)
        if step >= self.train.steps - 1:
            raise RuntimeError(
                f"train.resume: the checkpoint at step {step} already covers train.steps={self.train.steps}; "
                "nothing is left to run"
            )
        load_s = self.load_from(location)
        self.resumed = LoadRecord(step, load_s, folder_bytes(location))
        return step + 1

    def _prepare_fresh_dir(self) -> None:
        if is_url(self.directory):
            fs, path = _fs(self.directory)
            fs.makedirs(path, exist_ok=True)
        else:
            Path(self.directory).mkdir(parents=True, exist_ok=True)
        # A new run's checkpoints replace an earlier run's: its marker must not name a folder this run overwrites.
        remove_marker(self.directory)

    # -- in the loop --

    def after_step(self, step: int) -> None:
        if not self.train.saves_after(step):
            return
        if self.mode == "sync":
            self._save_sync(step)
        else:
            self._save_async(step)

    def _save_sync(self, step: int) -> None:
        location = join(self.directory, checkpoint_folder(step))
        synchronize(self.device)  # the last step's kernels: in the window, not in this save
        started = time.perf_counter()
        try:
            metadata = dcp.save(
                self.state(), checkpoint_id=location, storage_writer=writer(location), process_group=self.group
            )
        except CheckpointException as exc:
            raise save_failed(step, location, exc) from None
        durable = time.perf_counter() - started
        if self.rank == 0:
            self._mark(step)
        self._bookkeep(step, metadata, blocked=time.perf_counter() - started, durable=durable, staging=None)

    def _save_async(self, step: int) -> None:
        synchronize(self.device)  # the last step's kernels: in the window, not in this save's staging
        started = time.perf_counter()
        # The previous save's bookkeeping happens in wait(): counted as its own, not as this save's blocked
        # time. Waiting first also keeps the stager's reused buffers from being overwritten mid-upload.
        previous_bookkeeping_s = self.wait()
        staging_started = time.perf_counter()
        state, location = self.state(), join(self.directory, checkpoint_folder(step))
        try:
            future = self._stage_and_upload(state, location)
        except RuntimeError as exc:
            if not self._staging.pinning_failed(exc):
                raise
            future = self._stage_and_upload(state, location)  # again, into pageable memory
        self._staging.staged()
        staged = time.perf_counter()
        blocked = staged - started - previous_bookkeeping_s
        flight = _InFlight(step, future, staging_started, staged - staging_started, blocked)
        future.add_done_callback(lambda done: self._on_async_done(flight, done))
        self._in_flight = flight

    def _stage_and_upload(self, state: dict, location: str):
        """`dcp.async_save` with this checkpointer's stager: it returns once the state is staged, with
        the upload's Future. With a stager of its own the writer must not copy ahead from the device
        (it would otherwise synchronise the upload thread's current device, GPU 0, with the training
        loop's queued kernels at every chunk it copies ahead); without one it stages, and turns that off
        itself. At a URL DCP's own fsspec writer keeps its default (`writer`)."""
        stager = self._staging.stager()
        if stager is None:
            return dcp.async_save(
                state, checkpoint_id=location, storage_writer=writer(location), process_group=self.group
            )
        return dcp.async_save(
            state,
            checkpoint_id=location,
            storage_writer=writer(location, per_thread_copy_ahead=0),
            process_group=self.group,
            async_stager=stager,
        )

    def _on_async_done(self, flight: _InFlight, future) -> None:
        """In DCP's writer thread: note when the save became durable and, on rank 0, mark it."""
        flight.done_at.append(time.perf_counter())
        try:
            if future.exception() is None and self.rank == 0:
                self._mark(flight.step)
        except BaseException as exc:  # noqa: BLE001 - a callback's exception would be lost: wait() raises it
            flight.error = exc
        finally:
            flight.marked.set()

    def wait(self) -> float:
        """Block until the save in flight (if any) is durable and marked; a failed save raises here.
        Returns the seconds its bookkeeping took (0 when nothing was in flight)."""
        flight, self._in_flight = self._in_flight, None
        if flight is None:
            return 0.0
        try:
            metadata = flight.future.result()
        except CheckpointException as exc:
            raise save_failed(flight.step, join(self.directory, checkpoint_folder(flight.step)), exc) from None
        flight.marked.wait()
        if flight.error is not None:
            raise flight.error
        return self._bookkeep(
            flight.step,
            metadata,
            blocked=flight.blocked_s,
            durable=flight.done_at[0] - flight.started,
            staging=flight.staging_s,
        )

    def close(self) -> None:
        """End of the loop (inside the timed window): the last async save must be durable too; then the
        staging buffers go (a pinned copy of the state would otherwise stay locked for the process)."""
        try:
            self.wait()
        finally:
            if self._staging is not None:
                self._staging.close()

    def _mark(self, step: int) -> None:
        folder = checkpoint_folder(step)
        write_marker(self.directory, CheckpointMarker(step, folder, self.world, self.point_id))

    def _bookkeep(self, step: int, metadata: Metadata, blocked: float, durable: float, staging: float | None) -> float:
        """After a durable save: count what each rank wrote (DCP's metadata), tell the listener; the
        seconds this took, recorded with the save (inside the timed window, outside blocked_s)."""
        started = time.perf_counter()
        files, tensors = written_bytes(metadata, self.world)
        meta_bytes = file_size(join(join(self.directory, checkpoint_folder(step)), DCP_METADATA_FILE))
        if _LISTENER is not None:
            _LISTENER.on_durable(step, join(self.directory, checkpoint_folder(step)), self.point_id)
        seconds = time.perf_counter() - started
        self.saves.append(SaveRecord(step, blocked, durable, staging, files, int(meta_bytes), tensors, seconds))
        return seconds

    # -- after the timed window --

    def finish(self) -> None:
        """After the timed window: the measured load, then the superseded step folders go."""
        self.measure_load()
        self.prune()

    def measure_load(self) -> None:
        """Load the latest checkpoint back into the model (after the window): load time and read bandwidth."""
        if self.mode == "none":
            return
        marker = self.agreed_marker()
        if marker is None:
            raise RuntimeError(f"train.checkpoint: no complete checkpoint in {self.directory} after the run")
        location = join(self.directory, marker.folder)
        load_s = self.load_from(location)
        self.load = LoadRecord(marker.step, load_s, folder_bytes(location))

    def prune(self) -> None:
        """Keep the latest complete checkpoint only: rank 0 removes every other step folder (after the
        window), while its launch is owned (never a rerun's folders)."""
        if self.rank == 0 and (marker := read_marker(self.directory)) is not None:
            check_owned()
            for folder in step_folders(self.directory):
                if folder != marker.folder:
                    remove_folder(join(self.directory, folder))
        dist.barrier(group=self.group)

    def record_section(self, device: torch.device, metrics: Metrics) -> CheckpointMetrics:
        """The record's `metrics.checkpoint` (every rank calls it: times are reduced to the slowest rank).

        Goodput: tokens/s over the timed window, saves included, against the point's tokens/s from
        its step-time median (which no save touches: saves run between the timed steps). The
        blocked fraction: what the saves took from the window, their blocked time and their
        bookkeeping.
        """
        section = self.summary(device)
        window, timed = metrics.timed_window_s or 0.0, len(metrics.step_times_s)
        with_checkpoints = metrics.tokens_per_step * timed / window if window > 0 and timed else None
        section.tokens_per_s_with_checkpoints = with_checkpoints
        section.goodput = with_checkpoints / metrics.tokens_per_s if with_checkpoints else None
        # What the saves alone took from the window: robust where step times themselves vary.
        section.blocked_fraction = (section.blocked_s + section.bookkeeping_s) / window if window > 0 else None
        return section

    def summary(self, device: torch.device) -> CheckpointMetrics:
        """Saves, loads and totals as this rank knows them, times reduced to the slowest rank, and the
        most degraded staging of any rank (bench.schema.checkpoint.STAGINGS is ordered so)."""
        per_save = [(s.blocked_s, s.durable_s, s.staging_s or 0.0, s.bookkeeping_s) for s in self.saves]
        times = [t for save in per_save for t in save]
        times += [self.load.load_s if self.load else 0.0, self.resumed.load_s if self.resumed else 0.0]
        staged_as = self._staging.kind if self._staging is not None and self.saves else None
        times.append(STAGINGS.index(staged_as) if staged_as else -1)
        slowest = torch.tensor(times, dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        values = slowest.tolist()
        code = values.pop()
        staged_as = STAGINGS[int(code)] if code >= 0 else None
        saves = []
        for i, save in enumerate(self.saves):
            blocked, durable, staging, bookkeeping = values[4 * i : 4 * i + 4]
            total = sum(save.bytes_per_rank) + save.metadata_bytes
            saves.append(
                CheckpointSave(
                    step=save.step,
                    blocked_s=blocked,
                    staging_s=staging if save.staging_s is not None else None,
                    durable_s=durable,
                    bookkeeping_s=bookkeeping,
                    bytes=total,
                    bytes_per_rank=save.bytes_per_rank,
                    metadata_bytes=save.metadata_bytes,
                    state_bytes_per_rank=save.state_bytes_per_rank,
                    write_bytes_per_s=total / durable if durable > 0 else None,
                )
            )
        load_s, resume_s = values[-2], values[-1]
        return CheckpointMetrics(
            mode=self.mode,
            every=self.train.save_interval,
            dir=self.directory,
            saves=saves,
            staging=staged_as,
            blocked_s=sum(s.blocked_s for s in saves),
            bookkeeping_s=sum(s.bookkeeping_s for s in saves),
            write_bytes_per_s=write_bandwidth((s.bytes, s.durable_s) for s in saves),
            load=_load_section(self.load, load_s),
            resumed=_load_section(self.resumed, resume_s),
        )


def save_failed(step: int, location: str, exc: CheckpointException) -> RuntimeError:
    """One line for a failed save: DCP raises a CheckpointException holding each failing rank's exception."""
    failures = getattr(exc, "failures", None) or {}
    if failures:
        rank, error = min(failures.items())
        error = error[0] if isinstance(error, tuple) else error  # DCP keeps (exception, stack)
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        reason = f"rank {rank}: {type(error).__name__}: {first}"
    else:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return RuntimeError(f"train.checkpoint: the save after step {step} to {location} failed ({reason})")


def _load_section(record: LoadRecord | None, seconds: float) -> CheckpointLoad | None:
    if record is None:
        return None
    return CheckpointLoad(
        step=record.step,
        load_s=seconds,
        bytes=record.bytes,
        read_bytes_per_s=record.bytes / seconds if seconds > 0 else None,
    )


def _step_of(location: str) -> int:
    name = location.rstrip("/").rsplit("/", 1)[-1]
    if not name.startswith(CHECKPOINT_STEP_PREFIX):
        raise RuntimeError(f"train.resume: {location} is not a step folder ({CHECKPOINT_STEP_PREFIX}<step>)")
    return int(name.removeprefix(CHECKPOINT_STEP_PREFIX))
