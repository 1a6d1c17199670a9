"""The torchrun entry point: a launch file in, one result.json per point out.

    torchrun ... -m fsdp_core.worker LAUNCH.json

LAUNCH.json (bench/schema/protocol.py's LaunchFile, written by bench, resolved: ranks never see
Hydra) holds one or more points that share this world shape; they run in turn, each with a fresh
model and clean state. The ranks read it into the same pydantic types the parent wrote (each point's
spec validated again here) and pass the spec's typed sections on; the record is a RunResult, built
from the typed parts the engine measures. Rank 0 writes each point's result.json atomically. A rank
that fails leaves `<point_dir>/errors/rank<R>.json` with a one-line reason, then exits non-zero;
bench turns that into a failed/oom record.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from bench.schema.breakdown import StepBreakdown, breakdown_of
from bench.schema.devices import PeakEntry, peak_tflops
from bench.schema.files import write_json_atomic
from bench.schema.protocol import (
    PREFLIGHT_MEASUREMENTS,
    RANKS_PER_HOST_ENV,
    RESULT_FILE,
    STARTED_MARK,
    SWEEP_LOCK,
    LaunchFile,
    LaunchPoint,
    PreflightTask,
    RankError,
    checkpoint_location,
    collective_timeout_s,
    sweep_dir_of,
)
from bench.schema.record import SCHEMA_VERSION, Metrics, RunResult, rank_record_json
from bench.schema.spec import RunSpec
from fsdp_core import flight_recorder, memory_history
from fsdp_core.data import build_source
from fsdp_core.job import JobClock
from fsdp_core.lifeline import LaunchAbandoned, bind_to_agent, check_owned, hold, still_owned
from fsdp_core.metrics import (
    capture_env,
    gather_floats,
    host_loads,
    max_over_ranks,
    peak_memory_record,
    step_time_stats,
)
from fsdp_core.model import build_model
from fsdp_core.parallelize import materialize, parallelize_llama, point_mesh, set_collective_timeout
from fsdp_core.precision import build_grad_scaler, check_precision_supported
from fsdp_core.preflight import run_preflight
from fsdp_core.profiling import RankProfile
from fsdp_core.step_split import rank_medians
from fsdp_core.telemetry import gather_telemetry
from fsdp_core.train import LoopResult, run_loop


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def setup_device(device_type: str, threads_per_rank: int) -> torch.device:
    """Pick this rank's device; on CPU, size its thread pool so ranks never oversubscribe the cores."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    ranks_here = int(os.environ.get(RANKS_PER_HOST_ENV) or os.environ.get("LOCAL_WORLD_SIZE", 1))
    threads = threads_per_rank or max(1, (os.cpu_count() or 1) // ranks_here)
    torch.set_num_threads(threads)
    return torch.device("cpu")


def init_distributed(device: torch.device, timeout: dt.timedelta, cpu_offload: bool) -> None:
    if dist.is_initialized():
        return
    backend = "gloo"
    if device.type == "cuda":
        # CPU offload keeps some collectives' tensors on the host: gloo serves those.
        backend = "cpu:gloo,cuda:nccl" if cpu_offload else "nccl"
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    dist.init_process_group(backend=backend, timeout=timeout, **kwargs)


def run_point(point: LaunchPoint, launch: LaunchFile) -> None:
    """Train one point and have rank 0 write its record; leave no compiled state behind."""
    memory_history.reset()  # a snapshot on a failure holds this point's history only
    spec, started, t0, entered = point.spec, now_iso(), time.perf_counter(), time.time()
    train = spec.train
    point_dir = Path(point.point_dir)
    device = setup_device(spec.device_type, train.threads_per_rank)
    timeout = dt.timedelta(seconds=collective_timeout_s(spec.sweep.point_timeout_s))
    init_distributed(device, timeout, train.cpu_offload)
    flight_recorder.begin_point(point_dir, point.point_id, spec.sweep.point_timeout_s, entered)
    history_note = memory_history.start(spec.profile, device)  # from set-up through the warm-up steps
    clock = JobClock(spec, point_dir, launch.max_failures, started=entered)
    if dist.get_rank() == 0:
        check_owned()
        point_dir.mkdir(parents=True, exist_ok=True)
        (point_dir / STARTED_MARK).write_text(started)
    check_precision_supported(spec.precision, device)
    torch.manual_seed(train.seed)
    # torch.distributed.checkpoint loads only for a point that checkpoints, and compile_stats (and
    # through its backend torch._dynamo) only for one that compiles: a rank that needs neither does
    # not pay for their imports (FSDP2's fully_shard imports dynamo itself, so a training rank pays for
    # that one anyway; a preflight-only launch does not).
    compile_stats = _compile_stats() if train.compile else None
    try:
        flight_recorder.doing("building the model and optimizer")
        model, optimizer, scaler = build_training(spec, device, timeout)
        source = build_source(train.data, spec.model.vocab_size, train.seed)
        checkpointer = None
        if train.checkpoints:
            from fsdp_core.checkpoint import Checkpointer

            directory = checkpoint_location(train, point.point_dir)
            checkpointer = Checkpointer(train, directory, point.point_id, model, optimizer, scaler, timeout, device)
        clock.initialized()
        flight_recorder.doing("restoring the checkpoint")
        start_step = checkpointer.start(restarted=clock.attempt > 0) if checkpointer else 0
        clock.restored(start_step)
        loop = run_loop(
            model,
            optimizer,
            scaler,
            source,
            spec,
            device,
            hook=checkpointer,
            start_step=start_step,
            clock=clock,
            trace_dir=point_dir,
        )
        clock.loop_ended()
        loop.losses = clock.full_losses(loop.losses)  # a restarted attempt's record holds every step
        if checkpointer:
            flight_recorder.doing("checkpoint load after the timed window")
            checkpointer.finish()  # after the timed window: the measured load, then old step folders go
        record = assemble_record(point, launch, loop, device, started, time.perf_counter() - t0)
        if checkpointer:
            record.metrics.checkpoint = checkpointer.record_section(device, record.metrics)
        if compile_stats is not None:
            record.metrics.compile = compile_stats.summary()
        if history_note:
            record.notes["memory_history"] = history_note
        if dist.get_rank() == 0:
            check_owned()
            record.metrics.job = clock.section()
            write_json_atomic(point_dir / RESULT_FILE, rank_record_json(record))
        del model, optimizer, scaler
        flight_recorder.end_point(finished=True)
    except BaseException as exc:
        if is_oom(exc):  # the allocator's state as the failure left it, before the cleanup below frees its cache
            memory_history.dump_on_failure(point_dir, dist.get_rank())
        raise
    finally:
        flight_recorder.end_point(finished=False)
        memory_history.stop()
        # The next point of this launch must compile as if it ran alone: without a reset, dynamo
        # keeps this point's graphs, recompiles the next shape with dynamic shapes (other kernels
        # than a lone run), and enough points reach its recompile limit (a failure under fullgraph).
        # A compiled point resets its compile counts with dynamo (fsdp_core/compile_stats.py).
        if compile_stats is not None:
            compile_stats.close()
        else:
            torch.compiler.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    dist.barrier()


def _compile_stats():
    """A CompileStats started now; imported here, for the points that compile only (see run_point)."""
    from fsdp_core.compile_stats import CompileStats

    return CompileStats()


def build_training(spec: RunSpec, device: torch.device, timeout: dt.timedelta | None = None):
    """Meta model -> parallelised -> materialised, plus AdamW and the fp16 scaler."""
    train = spec.train
    model = parallelize_llama(build_model(spec.model), spec, point_mesh(spec, device.type, timeout))
    materialize(model, device, train.seed, offload=train.cpu_offload)
    # fused on GPU (one kernel, no full-size temporaries; torchtitan's default), foreach on CPU where
    # fused AdamW is slower: one multi-tensor kernel per group instead of one per parameter.
    fused = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=0.1, fused=fused, foreach=not fused)
    return model, optimizer, build_grad_scaler(spec.precision, device.type)


PEAK_MEM_NOTES = {
    "cpu": "peak resident set size of each rank's process over the timed steps (CPU: includes the Python runtime)",
    "cuda": "over the timed steps: max = allocator peak allocated, reserved_max = allocator peak reserved, "
    "device_used_max = driver's used memory at the end of the window (context and NCCL included)",
}


def assemble_record(
    point: LaunchPoint, launch: LaunchFile, loop: LoopResult, device: torch.device, started: str, wall_s: float
) -> RunResult:
    """The point's record from what every rank measured (collectives: every rank calls it)."""
    spec, world = point.spec, dist.get_world_size()
    step_times = max_over_ranks(loop.step_times_s, device)
    losses = torch.tensor(loop.losses, dtype=torch.float64, device=device)
    dist.all_reduce(losses)
    losses = (losses / world).tolist()
    env = capture_env(device, launch.git, launch.harness, launch.conditions)
    rank_medians = gather_floats(statistics.median(loop.busy_s), device)
    metrics, notes = throughput_metrics(
        spec,
        step_times,
        env.device_name,
        point,
        launch.peak_table,
        rank_step_time_medians_s=rank_medians,
        slowest_rank=max(range(world), key=rank_medians.__getitem__),
        host_load=host_loads(loop.load, spec.device_type),
        peak_mem_bytes=peak_memory_record(loop.memory, device),
        comm_bytes_per_step=loop.comm_bytes,
        loss_first=losses[0],
        loss_last=losses[-1],
        losses=losses,
        timed_window_s=loop.timed_window_s,
        **loop.metrics,
    )
    notes["peak_mem_bytes"] = PEAK_MEM_NOTES["cuda" if device.type == "cuda" else "cpu"]
    if loop.telemetry is not None:
        metrics.telemetry = gather_telemetry(
            loop.telemetry,
            Path(point.point_dir),
            tokens=spec.tokens_per_step * len(step_times),
            window_s=loop.timed_window_s,
            device_type=device.type,
        )
    else:
        notes["telemetry"] = "not sampled (telemetry.enabled=false)"
    if loop.profile is not None:
        metrics.step_breakdown, profile_notes = gather_breakdown(loop.profile, spec.profile.steps)
        notes.update(profile_notes)
    if spec.profile.memory_categories:
        metrics.peak_mem_by_category, note = gather_categories(loop.mem_categories, loop.mem_categories_note)
        if note:
            notes["peak_mem_by_category"] = note
    if loop.comm_bytes is None:
        notes["comm_bytes_per_step"] = "counted on the last warm-up step: needs train.warmup_steps >= 1"
    return RunResult(
        schema_version=SCHEMA_VERSION,
        point_id=point.point_id,
        sweep=spec.sweep.name,
        status="ok",
        error=None,
        started_at=started,
        finished_at=now_iso(),
        wall_s=wall_s,
        spec=spec,
        recipe=point.recipe,
        model_info=spec.model.info(),
        metrics=metrics,
        env=env,
        notes=notes,
        log_dir=point.log_dir,
    )


def gather_categories(mine: dict[str, int] | None, why_not: str | None) -> tuple[dict[str, int] | None, str | None]:
    """The categories of the rank whose tracked peak was largest (a collective: every rank calls it),
    or None and why not (the first rank's reason)."""
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (mine, why_not))
    measured = [categories for categories, _ in everyone if categories]
    if not measured:
        return None, next((note for _, note in everyone if note), "not measured")
    return max(measured, key=lambda c: c.get("Total", 0)), None


def gather_breakdown(profile: RankProfile, steps: int) -> tuple[StepBreakdown, dict[str, str]]:
    """The record's `metrics.step_breakdown` from every rank's profiled steps (a collective: every
    rank calls it), and its notes (a trace cut at a step, one not written)."""
    mine = {
        **rank_medians(profile.split),
        "device": profile.split.get("device"),
        "missing": profile.split.get("missing") or {},
        "timer_step_s": statistics.median(profile.timer_steps_s) if profile.timer_steps_s else None,
        "export_s": profile.export_s,
        "trace": profile.trace,
        "trace_bytes": profile.trace_bytes,
        "gzip_bytes": profile.gzip_bytes,
        "notes": profile.notes,
    }
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    notes = [note for rank in everyone for note in rank["notes"]]
    return breakdown_of(everyone, steps), {"step_breakdown": "; ".join(notes)} if notes else {}


def throughput_metrics(
    spec: RunSpec,
    step_times: list[float],
    device_name: str,
    point: LaunchPoint,
    peak_table: list[PeakEntry],
    **measured,
) -> tuple[Metrics, dict[str, str]]:
    """tokens/s, step-time distribution, achieved TFLOP/s, MFU and HFU (null with a reason when
    unknown), with the point's other `measured` metrics."""
    world, tokens_per_step = spec.world_size, spec.tokens_per_step
    stats = step_time_stats(step_times)
    tokens_per_s = tokens_per_step / stats.median
    per_device = tokens_per_s / world
    model_flops, hw_flops = spec.flops_per_token, spec.hardware_flops_per_token
    peak, reason = peak_tflops(peak_table, device_name, point.mfu_peak_dtype)
    notes = {"mfu": reason, "hfu": reason} if reason else {}
    if point.fp8_peak_dtype:
        # fp8 runs: MFU above divides by the bf16 peak (torchtitan's and most published tables'
        # convention: attention, norms and the output layer stay bf16); this one by the fp8 peak.
        fp8_peak, _ = peak_tflops(peak_table, device_name, point.fp8_peak_dtype)
        measured["mfu_fp8_peak"] = per_device * model_flops / (fp8_peak * 1e12) if fp8_peak else None
        notes["mfu"] = (
            reason or "fp8: MFU against the bf16 peak (torchtitan's convention); mfu_fp8_peak against the fp8 peak"
        )
    metrics = Metrics(
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_device=per_device,
        step_times_s=step_times,
        step_time_s=stats,
        tflops_per_device=per_device * model_flops / 1e12,
        peak_flops_per_device=peak * 1e12 if peak else None,
        mfu=per_device * model_flops / (peak * 1e12) if peak else None,
        hfu=per_device * hw_flops / (peak * 1e12) if peak else None,
        flops_per_token=model_flops,
        tokens_per_step=tokens_per_step,
        **measured,
    )
    return metrics, notes


def is_oom(exc: BaseException) -> bool:
    """An out-of-memory: torch's own error, or a message that says so (a CUDA error raised otherwise)."""
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def record_failure(point: LaunchPoint | PreflightTask, exc: BaseException) -> None:
    """Leave this rank's one-line reason where bench will look for it (never for an abandoned launch)."""
    if isinstance(exc, LaunchAbandoned) or not still_owned():
        return
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    message = f"{type(exc).__name__}: {first}".strip()
    oom = is_oom(exc)
    rank = int(os.environ.get("RANK", 0))
    error = RankError(rank, type(exc).__name__, message[:500], oom, traceback.format_exc()[-4000:])
    if oom:  # in which phase, and what filled the memory (profile.memory_history, CUDA: its snapshot's summary)
        error.largest = memory_history.dump_on_failure(Path(point.point_dir), rank)
        error.phase = flight_recorder.doing_now()
    if isinstance(exc, OSError):
        error.errno, error.filename = exc.errno, None if exc.filename is None else str(exc.filename)
    error.write(Path(point.point_dir))


def run_preflight_task(task: PreflightTask, launch: LaunchFile) -> None:
    """The launch's preflight, before its points, on the same ranks and process group."""
    spec = task.spec
    try:
        device = setup_device(spec.device_type, spec.train.threads_per_rank)
        timeout = dt.timedelta(seconds=collective_timeout_s(spec.sweep.point_timeout_s))
        init_distributed(device, timeout, spec.train.cpu_offload)
        set_collective_timeout(timeout)
        run_preflight(task, device, timeout, launch.git, launch.harness)
    except BaseException as exc:  # noqa: BLE001 - the reason is left for the parent, then the launch ends
        record_failure(task, exc)
        raise


def run_launch(launch: LaunchFile | dict) -> None:
    """Run a launch's points in turn in this process; a failing point leaves its reason, then re-raises.

    Callable in-process (Ray Train's TorchTrainer uses it as train_loop_per_worker, with the
    process group already initialised, and hands it the launch file's content as a dict, validated
    here as the file would be); `main` is the torchrun entry point around it.
    """
    launch = launch if isinstance(launch, LaunchFile) else LaunchFile.model_validate(launch)
    items = [p.point_dir for p in launch.points] + ([launch.preflight.point_dir] if launch.preflight else [])
    hold(launch.owner, sweep_dir_of(Path(items[0])) / SWEEP_LOCK if items else None)
    if launch.preflight is not None and not (Path(launch.preflight.point_dir) / PREFLIGHT_MEASUREMENTS).exists():
        run_preflight_task(launch.preflight, launch)
    for point in launch.points:
        if (Path(point.point_dir) / RESULT_FILE).exists():
            continue  # recorded by this launch before a restart (the parent clears older records first)
        try:
            run_point(point, launch)
        except BaseException as exc:  # noqa: BLE001 - every failure must leave its reason behind
            record_failure(point, exc)
            raise


def main(argv: list[str]) -> int:
    bind_to_agent()  # first: a rank never outlives its torchrun agent (fsdp_core/lifeline.py)
    launch = LaunchFile.read(Path(argv[0]))
    # What is alive now (the objects of the modules torch and this package imported) lives as long as
    # the process: frozen, it is no longer walked by each point's gc.collect() nor by Python's
    # automatic full collections during the steps.
    gc.freeze()
    try:
        run_launch(launch)
    except BaseException as exc:  # noqa: BLE001 - the reason is recorded; exit without teardown
        with contextlib.suppress(OSError):  # stderr may be a log file on the full disk that failed us
            if isinstance(exc, LaunchAbandoned):
                print(f"fsdp-bench rank: stopping without writing: {exc}", file=sys.stderr, flush=True)
            else:
                traceback.print_exc()
                sys.stderr.flush()
        # Skip interpreter teardown: a process group with a dead peer can hang in its destructor.
        os._exit(1)
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
