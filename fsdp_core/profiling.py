"""Profiled steps (profile.*): torch.profiler around a few steps after the timed window, each rank's
trace saved beside the record and split into compute, communication and idle (fsdp_core/step_split.py).

The profiler's schedule runs one untraced warm-up step, then `profile.steps` traced ones. Each step
is the harness's own range (`step_split.STEP_RANGE`, a record_function from the step timer's start to
its stop: the time the timer measures, its closing barrier in it, the opening one before it, as in the
timer), not the profiler's `ProfilerStep#N`, which also holds the profiler's bookkeeping between steps. CPU activity always, CUDA activity on a GPU; shapes and stacks
off (they multiply the trace's size). The trace is exported as JSON (torch's Chrome trace), read back
here to split it, cut at a whole step when it is larger than `profile.max_mib`, and written gzipped
(`trace_rank<R>.json.gz`, which Perfetto and Holistic Trace Analysis open) only while this rank's
launch is owned (fsdp_core/lifeline.py).
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile, schedule

from bench.schema.files import atomic_path
from bench.schema.protocol import trace_file_name
from bench.schema.spec import ProfileSpec
from fsdp_core.lifeline import still_owned
from fsdp_core.metrics import StepTimer
from fsdp_core.step_split import STEP_RANGE, cut_at_step, split_trace

MIB = 1 << 20


@dataclass
class RankProfile:
    """This rank's profiled steps: the split per step (step_split.split_trace's), its trace file, the
    step timer's times of the same steps, and what the export cost."""

    split: dict
    trace: str | None
    timer_steps_s: list[float]
    export_s: float
    trace_bytes: int  # the exported JSON (uncompressed), after any cut
    gzip_bytes: int
    notes: list[str] = field(default_factory=list)


def profile_steps(
    run_step: Callable[[int, StepTimer], None],
    profile_spec: ProfileSpec,
    device: torch.device,
    rank: int,
    out: Path | None,
) -> RankProfile:
    """Run 1 + profile.steps steps under the profiler (`run_step(index, timer)` trains one, between the
    timer's start and stop); the trace goes to `out`/trace_rank<rank>.json.gz (`out` None: split, not kept)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    timer = StepTimer(device)
    plan = schedule(wait=0, warmup=1, active=profile_spec.steps, repeat=1)
    with profile(activities=activities, schedule=plan, record_shapes=False, with_stack=False) as prof:
        for index in range(1 + profile_spec.steps):
            timer.start()  # CPU: the opening barrier, before the timer's own time starts
            with record_function(STEP_RANGE):
                run_step(index, timer)
                timer.stop()  # CPU: the closing barrier, the wait for the slowest rank
            prof.step()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fsdp-bench-trace-") as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        export_s = time.perf_counter() - started
        text = raw.read_bytes()
    trace = json.loads(text)
    notes = []
    trace, kept = cut_at_step(trace, len(text), profile_spec.max_mib * MIB)
    if kept is not None:
        text = json.dumps(trace).encode()
        notes.append(
            f"rank {rank}: trace cut to its first {kept} step(s), over profile.max_mib={profile_spec.max_mib:g}"
        )
    written, gzip_bytes = None, 0
    if out is not None and still_owned():
        out.mkdir(parents=True, exist_ok=True)
        with atomic_path(out / trace_file_name(rank)) as partial:
            with gzip.open(partial, "wb", compresslevel=6) as handle:
                handle.write(text)
            gzip_bytes = os.path.getsize(partial)
        written = trace_file_name(rank)
    timed = timer.times_s()[1:]  # the profiler's warm-up step is not traced
    return RankProfile(split_trace(trace), written, timed, export_s, len(text), gzip_bytes, notes)
