"""The timed training loop: warm-up, timed steps, counted communication, losses.

Nothing in the timed region reads a value back to the host (no `loss.item()`): losses stay
on the device and are read after the loop, so timing is not distorted by per-step syncs.
Communication is counted on the last warm-up step: the counts are the same every step, and
the counting dispatch mode adds Python overhead that must stay out of the timed steps.
Telemetry (fsdp_core/telemetry.py) is set up before the loop, sampled by a background thread from
the opening of the timed window to its closing sync, and never touches the device stream.
A `StepHook` (fsdp_core/checkpoint.py's Checkpointer) runs after each step, outside the step's
time but inside the timed window, and closes before the window does.
With profile.enabled, profiled steps (fsdp_core/profiling.py) follow the timed window and its memory
snapshot, so nothing measured is ever profiled: the same slow-down knobs, no fault injection, no step
hook, and their losses stay out of `losses` (the numerics guard's curves).

The loop reads the point's validated spec (bench.schema.spec.RunSpec): `train` for the steps and the
batch, `debug` for the fault and slow-down knobs, `telemetry` for sampling.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F

from bench.schema.protocol_names import (
    FR_BACKWARD,
    FR_CHECKPOINT,
    FR_CLOSING_BARRIER,
    FR_FORWARD,
    FR_OPENING_BARRIER,
    FR_OPTIMIZER,
)
from bench.schema.record import CommBytes
from bench.schema.spec import DebugKnobs, RunSpec, TelemetrySpec
from fsdp_core import flight_recorder, memory_history
from fsdp_core.comm_counter import KINDS, CommCounter
from fsdp_core.data import local_batch
from fsdp_core.memory_categories import categories_at_peak
from fsdp_core.metrics import StepTimer, memory_snapshot, node_name, reset_peak_memory, synchronize
from fsdp_core.precision import after_optimizer_step
from fsdp_core.profiling import RankProfile, profile_steps
from fsdp_core.telemetry import Sampler, prepare_sampler


class StepClock(Protocol):
    """The whole job's clock (fsdp_core/job.py): told when each step starts, ends and its hook is done,
    and when the profiled steps ran."""

    def before_step(self, step: int) -> None: ...

    def step_done(self, step: int, loss: torch.Tensor) -> None: ...

    def hook_done(self, step: int) -> None: ...

    def profiled(self, started: float, ended: float) -> None: ...


class StepHook(Protocol):
    def after_step(self, step: int) -> None: ...

    def close(self) -> None: ...


@dataclass
class LoopResult:
    step_times_s: list[float]  # timed steps, this rank's view
    losses: list[float]  # every step, this rank's mean loss
    comm_bytes: CommBytes | None  # counted on the last warm-up step (None: a resumed run past it)
    timed_window_s: float = 0.0
    memory: dict[str, int | None] | None = None  # this rank's peak memory over the timed window
    telemetry: dict | None = None  # this rank's sampled series over the timed window
    busy_s: list[float] = field(default_factory=list)  # this rank's own part of each timed step
    load: tuple[float, float] = (0.0, 0.0)  # the host's 1-minute load average when the window opened, closed
    # Fields of the record's `metrics` the loop measures itself, the same on every rank (rank 0's go
    # into the record as they are): a new loop metric needs its schema field and catalogue entry, not
    # the worker.
    metrics: dict[str, Any] = field(default_factory=dict)
    comm_calls: dict[str, int] = field(default_factory=dict)  # collectives per kind on the counted step
    profile: RankProfile | None = None  # profile.enabled: this rank's profiled steps
    # profile.memory_categories: this rank's memory by category at its peak, or why there is none
    mem_categories: dict[str, int] | None = None
    mem_categories_note: str | None = None


def inject_fault(debug: DebugKnobs, step: int, rank: int) -> None:
    """The documented fault-injection knob (debug.fail_rank / debug.fail_step / hang / oom)."""
    if debug.fail_step != step or debug.fail_rank != rank:
        return
    if debug.hang:
        flight_recorder.doing(f"debug.hang of step {step}")
        while True:  # the point's timeout must end this
            time.sleep(3600)
    if debug.oom:
        flight_recorder.doing(f"debug.oom of step {step}")
        raise torch.OutOfMemoryError(f"debug: injected out-of-memory on rank {rank} at step {step}")
    raise RuntimeError(f"debug: injected failure on rank {rank} at step {step}")


def train_step(
    model, optimizer, scaler, source, spec: RunSpec, step: int, device: torch.device, label: str | None = None
) -> torch.Tensor:
    """One optimizer step over train.grad_accum micro-batches; returns the mean loss as a device tensor.
    `label` names the step in what the harness says it is doing (default "step <step>")."""
    rank, train = dist.get_rank(), spec.train
    label = label or f"step {step}"
    total = torch.zeros((), device=device)
    for micro in range(train.grad_accum):
        inputs, targets = local_batch(source, step, micro, rank, train.micro_batch, train.seq_len)
        inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        # Cross-entropy in fp32 whatever the compute dtype: bf16 log-softmax loses the signal. The
        # logits are not kept through backward (autograd keeps only the fp32 log-softmax), as
        # torchtitan frees its own: batch x sequence x vocab bytes less at the memory peak.
        flight_recorder.doing(f"{FR_FORWARD} of {label}")
        with memory_history.phase(FR_FORWARD):
            loss = F.cross_entropy(model(inputs).flatten(0, 1).float(), targets.flatten()) / train.grad_accum
        flight_recorder.doing(f"{FR_BACKWARD} of {label}")
        with memory_history.phase(FR_BACKWARD):
            (scaler.scale(loss) if scaler else loss).backward()
        total += loss.detach()
    flight_recorder.doing(f"{FR_OPTIMIZER} of {label}")
    with memory_history.phase(FR_OPTIMIZER):
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    after_optimizer_step(model, spec.precision)
    return total


def run_loop(
    model,
    optimizer,
    scaler,
    source,
    spec: RunSpec,
    device: torch.device,
    hook: StepHook | None = None,
    start_step: int = 0,
    clock: StepClock | None = None,
    trace_dir: Path | None = None,
) -> LoopResult:
    """Warm-up steps (the last one counted), then timed steps bounded by device syncs.

    `start_step` is what the spec cannot say: where a resumed run starts (after its checkpoint's
    step, fsdp_core/checkpoint.py). A resumed run injects no fault: it recovers from the one that fired.
    The `clock` (the whole job's accounting, and the debug kills) sees every step's start and end.
    `trace_dir`: where profiled steps (profile.enabled) leave this rank's trace: the point's folder.
    """
    train = spec.train
    timer, counter = StepTimer(device), CommCounter(model.parameters())
    losses: list[torch.Tensor] = []
    rank = dist.get_rank()
    window_start, load_before, counts_at_start = None, 0.0, None
    sampler = telemetry_sampler(spec.telemetry, device, rank)
    skipped = None  # fp16: timed steps the gradient scaler skipped, counted on its device
    for step in range(start_step, train.steps):
        if clock is not None:
            clock.before_step(step)
        if start_step == 0:
            inject_fault(spec.debug, step, rank)
        counted = step == train.warmup_steps - 1
        timed = step >= train.warmup_steps
        if timed and window_start is None:
            memory_history.stop()  # no timed step runs under the allocator's history (profile.memory_history)
            load_before = os.getloadavg()[0]
            window_start, counts_at_start = start_timed_window(device, sampler)
        if timed:
            flight_recorder.doing(f"{FR_OPENING_BARRIER} of step {step}")
            timer.start()
        scale_before = scaler_scale(scaler, device) if timed and scaler is not None else None
        if counted:
            # Eager for this one step: torch.compile refuses to trace under a dispatch mode, and
            # FSDP2's collectives (in hooks around the blocks) are the same compiled or not.
            with torch.compiler.set_stance("force_eager"), counter:
                losses.append(train_step(model, optimizer, scaler, source, spec, step, device))
        else:
            losses.append(train_step(model, optimizer, scaler, source, spec, step, device))
        if timed:
            _slow_down(spec.debug, timer, rank)
            flight_recorder.doing(f"{FR_CLOSING_BARRIER} of step {step}")
            timer.stop()
        if scale_before is not None:
            # The scaler backs its scale off exactly when it skips the optimizer step (inf/NaN gradients on
            # any rank: ShardedGradScaler agrees across ranks); compared on the device, read after the loop.
            skip = (scaler_scale(scaler, device) < scale_before).long()
            skipped = skip if skipped is None else skipped + skip
        if clock is not None:
            clock.step_done(step, losses[-1])
        if hook is not None and train.saves_after(step):  # named only where a save happens
            flight_recorder.doing(f"{FR_CHECKPOINT} after step {step}")
            with memory_history.phase(FR_CHECKPOINT):
                hook.after_step(step)
        elif hook is not None:
            hook.after_step(step)
        if clock is not None:
            clock.hook_done(step)
    if hook is not None:
        flight_recorder.doing(f"{FR_CHECKPOINT}: the last one's end")
        hook.close()
    synchronize(device)
    window = time.perf_counter() - window_start if window_start is not None else 0.0
    telemetry = sampler.stop() if sampler is not None and window_start is not None else None
    memory = memory_snapshot(device, counts_at_start)
    profiled = None
    if spec.profile.enabled:

        def profiled_step(index: int, step_timer: StepTimer) -> None:
            train_step(model, optimizer, scaler, source, spec, train.steps + index, device, f"profiled step {index}")
            _slow_down(spec.debug, step_timer, rank)

        profile_start = time.time()
        keeps_trace = spec.repeat % spec.profile.every_repeats == 0  # profile.every_repeats: one repeat in K
        profiled = profile_steps(profiled_step, spec.profile, device, rank, trace_dir if keeps_trace else None)
        if not keeps_trace and rank == 0:
            every = spec.profile.every_repeats
            profiled.notes.append(
                f"traces not kept: profile.every_repeats={every} keeps those of repeats 0, {every}, ..."
            )
        if clock is not None:
            clock.profiled(profile_start, time.time())
    categories, categories_note = None, None
    if spec.profile.memory_categories:

        def tracked_step() -> None:
            step = train.steps + spec.profile.steps + 1
            train_step(model, optimizer, scaler, source, spec, step, device, "the memory tracker's step")

        categories, categories_note = categories_at_peak(model, optimizer, tracked_step)
    return LoopResult(
        step_times_s=timer.times_s(),
        losses=[float(v) for v in torch.stack(losses).float().cpu().tolist()],
        comm_bytes=CommBytes(**counter.snapshot()) if start_step < train.warmup_steps else None,  # the counted step ran
        timed_window_s=window,
        memory=memory,
        telemetry=telemetry,
        busy_s=timer.busy_s(),
        load=(load_before, os.getloadavg()[0]),
        metrics={} if scaler is None else {"scaler_skipped_steps": int(skipped) if skipped is not None else 0},
        comm_calls={kind: int(counter.calls.get(kind, 0)) for kind in KINDS},
        profile=profiled,
        mem_categories=categories,
        mem_categories_note=categories_note,
    )


def scaler_scale(scaler, device: torch.device) -> torch.Tensor:
    """The gradient scaler's current scale as a new tensor on `device`, without the host sync
    get_scale() makes: its public scale() of a one (before its first step, its initial scale)."""
    return scaler.scale(torch.ones((), dtype=torch.float32, device=device))


def start_timed_window(device: torch.device, sampler: Sampler | None = None) -> tuple[float, dict[str, int]]:
    """Open the timed window: the warm-up's queued device work finishes first (else it would be
    timed), and the memory peak starts here, the allocator's cache released (else model
    initialisation, warm-up and the eager counting step would set it); so does the telemetry
    sampler's thread. Returns the window's start (host clock) and the allocator's counters then,
    from which the window's own alloc_retries are counted (fsdp_core/metrics.py)."""
    synchronize(device)
    counts = reset_peak_memory(device)
    if sampler is not None:
        sampler.start()
    return time.perf_counter(), counts


def telemetry_sampler(telemetry: TelemetrySpec, device: torch.device, rank: int) -> Sampler | None:
    """This rank's sampler, set up before the loop (NVML finds the GPU by the UUID CUDA gives it);
    None with telemetry.enabled=false."""
    if not telemetry.enabled:
        return None
    ids: dict = {}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        bus = (
            getattr(props, "pci_domain_id", None),
            getattr(props, "pci_bus_id", None),
            getattr(props, "pci_device_id", None),
        )
        ids = {
            "uuid": str(props.uuid) if getattr(props, "uuid", None) else None,
            "pci_bus_id": f"{bus[0]:08X}:{bus[1]:02X}:{bus[2]:02X}.0" if None not in bus else None,
            # A bare index names the right GPU only when CUDA sees every GPU in NVML's order.
            "index": device.index if not os.environ.get("CUDA_VISIBLE_DEVICES") else None,
        }
    meta = {"rank": rank, "host": node_name(), "device": str(device)}
    return prepare_sampler(telemetry.interval_ms, device.type, torch.get_num_threads(), ids, meta)


def slow_down_fraction(slow_fraction: float, slow_rank: int | None, rank: int) -> float:
    """The debug slow-down of this rank: slow_fraction on every rank, or only on slow_rank (half its
    own time when slow_fraction is 0): a regression or a straggler on demand."""
    if slow_rank is None:
        return slow_fraction
    return (slow_fraction or 0.5) if rank == slow_rank else 0.0


def _slow_down(debug: DebugKnobs, timer: StepTimer, rank: int) -> None:
    """Sleep this rank's debug slow-down fraction of the step's own time (validates checks and stragglers)."""
    fraction = slow_down_fraction(debug.slow_fraction, debug.slow_rank, rank)
    if fraction > 0:
        time.sleep(fraction * timer.elapsed_host_s())
