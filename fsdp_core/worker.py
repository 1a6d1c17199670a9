"""The torchrun entry point: a launch file in, one result.json per point out.

    torchrun ... -m fsdp_core.worker LAUNCH.json

LAUNCH.json (bench/schema/protocol.py's LaunchFile, written by bench, resolved: ranks never see
Hydra) holds one or more points that share this world shape; they run in turn, each with a fresh
model and clean state. Rank 0 writes each point's result.json atomically. A rank that fails
leaves `<point_dir>/errors/rank<R>.json` with a one-line reason, then exits non-zero; bench turns
that into a failed/oom record.
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

from bench.schema.ac_modes import DEFAULT_AC_EVERY
from bench.schema.files import write_json_atomic
from bench.schema.flops import flops_per_token, hardware_flops_per_token
from bench.schema.model_args import ModelArgs
from bench.schema.protocol import (
    RANKS_PER_HOST_ENV,
    RECORD_SCHEMA_VERSION,
    RESULT_FILE,
    STARTED_MARK,
    SWEEP_LOCK,
    LaunchFile,
    LaunchPoint,
    PreflightTask,
    RankError,
    collective_timeout_s,
    sweep_dir_of,
)
from fsdp_core.checkpoint import CheckpointConfig, Checkpointer
from fsdp_core.compile_stats import CompileStats
from fsdp_core.data import build_source
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
from fsdp_core.parallelize import ParallelConfig, build_mesh, materialize, parallelize_llama, set_collective_timeout
from fsdp_core.precision import build_grad_scaler, check_precision_supported
from fsdp_core.preflight import run_preflight
from fsdp_core.telemetry import gather_telemetry
from fsdp_core.train import LoopConfig, run_loop


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


def lookup_peak_tflops(peak_table: list[dict], device_name: str, dtype: str) -> tuple[float | None, str | None]:
    """(peak TFLOP/s, None) for a known device, or (None, reason): never another device's peak."""
    name = device_name.strip().removeprefix("NVIDIA ").strip()  # exact: "H200 NVL" is not an "H200"
    for entry in peak_table:
        if name in entry["match"]:
            peak = entry["peak_tflops"].get(dtype)
            if peak is None:
                return None, f"no {dtype} peak for {entry['device']} in the device table"
            return float(peak), None
    return None, f"device '{device_name}' is not in the peak-FLOPs table (sweeps/device/*.yaml)"


def run_point(point: LaunchPoint, launch: LaunchFile) -> None:
    """Train one point and have rank 0 write its record; leave no compiled state behind."""
    spec, started, t0 = point.spec, now_iso(), time.perf_counter()
    train = spec["train"]
    point_dir = Path(point.point_dir)
    device = setup_device(spec["cluster"]["device_type"], train.get("threads_per_rank", 0))
    timeout = dt.timedelta(seconds=collective_timeout_s(spec["sweep"]["point_timeout_s"]))
    init_distributed(device, timeout, train["cpu_offload"])
    if dist.get_rank() == 0:
        check_owned()
        point_dir.mkdir(parents=True, exist_ok=True)
        (point_dir / STARTED_MARK).write_text(started)
    check_precision_supported(spec["precision"], device)
    torch.manual_seed(train["seed"])
    compile_stats = CompileStats()
    try:
        args = model_args(spec)
        model, optimizer, scaler = build_training(args, spec, device, timeout)
        source = build_source(train["data"], args.vocab_size, train["seed"])
        ckpt_cfg = CheckpointConfig.from_spec(spec, point.point_dir, point.point_id)
        checkpointer = Checkpointer(ckpt_cfg, model, optimizer, scaler, timeout) if ckpt_cfg.active else None
        start_step = checkpointer.start() if checkpointer else 0
        loop = run_loop(model, optimizer, scaler, source, loop_config(spec, start_step), device, hook=checkpointer)
        if checkpointer:
            checkpointer.finish()  # after the timed window: the measured load, then old step folders go
        record = assemble_record(point, launch, args, loop, device, started, time.perf_counter() - t0)
        if checkpointer:
            record["metrics"]["checkpoint"] = checkpointer.record_section(device, record["metrics"])
        if train.get("compile"):
            record["metrics"]["compile"] = compile_stats.summary(model)
        if dist.get_rank() == 0:
            check_owned()
            write_json_atomic(point_dir / RESULT_FILE, record)
        del model, optimizer, scaler
    finally:
        # The next point of this launch must compile as if it ran alone: without a reset, dynamo
        # keeps this point's graphs, recompiles the next shape with dynamic shapes (other kernels
        # than a lone run), and enough points reach its recompile limit (a failure under fullgraph).
        torch.compiler.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    dist.barrier()


def model_args(spec: dict) -> ModelArgs:
    """The spec's resolved model section as the engine's model arguments."""
    return ModelArgs(**{k: v for k, v in spec["model"].items() if k != "overrides"})


def build_training(args: ModelArgs, spec: dict, device: torch.device, timeout: dt.timedelta | None = None):
    """Meta model -> parallelised -> materialised, plus AdamW and the fp16 scaler."""
    train = spec["train"]
    cfg = parallel_config(spec)
    model = parallelize_llama(build_model(args), cfg, build_mesh(cfg, device.type, timeout))
    materialize(model, device, train["seed"], offload=train["cpu_offload"])
    # fused on GPU (one kernel, no full-size temporaries; torchtitan's default), foreach on CPU where
    # fused AdamW is slower: one multi-tensor kernel per group instead of one per parameter.
    fused = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=train["lr"], weight_decay=0.1, fused=fused, foreach=not fused)
    return model, optimizer, build_grad_scaler(spec["precision"], device.type)


def parallel_config(spec: dict) -> ParallelConfig:
    train = spec["train"]
    return ParallelConfig(
        strategy=spec["strategy"],
        precision=spec["precision"],
        nodes=spec["nodes"],
        gpus_per_node=spec["gpus_per_node"],
        activation_checkpointing=train["activation_checkpointing"],
        ac_every=train.get("ac_every", DEFAULT_AC_EVERY),
        ac_save_ops=tuple(train["ac_save_ops"]) if train.get("ac_save_ops") is not None else None,
        compile=train["compile"],
        compile_backend=train.get("compile_backend", "inductor"),
        cpu_offload=train["cpu_offload"],
    )


def loop_config(spec: dict, start_step: int = 0) -> LoopConfig:
    """The loop's settings; a resumed run (start_step > 0) injects no fault: it recovers from the one that fired."""
    train, debug = spec["train"], spec.get("debug") or {}
    if start_step > 0:
        debug = {**debug, "fail_rank": None, "fail_step": None}
    telemetry = spec.get("telemetry") or {}  # bench.schema.spec.TelemetrySpec; absent: no sampling
    return LoopConfig(
        steps=train["steps"],
        warmup_steps=train["warmup_steps"],
        grad_accum=train["grad_accum"],
        micro_batch=train["micro_batch"],
        seq_len=train["seq_len"],
        precision=spec["precision"],
        fail_rank=debug.get("fail_rank"),
        fail_step=debug.get("fail_step"),
        hang=debug.get("hang", False),
        oom=debug.get("oom", False),
        slow_fraction=debug.get("slow_fraction", 0.0),
        telemetry_interval_ms=telemetry.get("interval_ms") if telemetry.get("enabled") else None,
        start_step=start_step,
        slow_rank=debug.get("slow_rank"),
    )


def assemble_record(
    point: LaunchPoint, launch: LaunchFile, args: ModelArgs, loop, device, started: str, wall_s: float
) -> dict:
    """The RunResult-shaped record (bench validates it with pydantic when it reads it back)."""
    spec, world = point.spec, dist.get_world_size()
    step_times = max_over_ranks(loop.step_times_s, device)
    losses = torch.tensor(loop.losses, dtype=torch.float64, device=device)
    dist.all_reduce(losses)
    losses = (losses / world).tolist()
    env = capture_env(device, launch.git, launch.harness)
    env["exclusive_host"] = launch.conditions.get("exclusive_host")
    metrics, notes = throughput_metrics(spec, args, step_times, env["device_name"], point, launch)
    rank_medians = gather_floats(statistics.median(loop.busy_s), device)
    metrics.update(
        {
            "rank_step_time_medians_s": rank_medians,
            "slowest_rank": max(range(world), key=rank_medians.__getitem__),
            "host_load": host_loads(loop.load, spec),
            "peak_mem_bytes": peak_memory_record(loop.memory, device),
            "comm_bytes_per_step": loop.comm_bytes,
            "loss_first": losses[0],
            "loss_last": losses[-1],
            "losses": losses,
            "timed_window_s": loop.timed_window_s,
        }
    )
    if device.type == "cpu":
        notes["peak_mem_bytes"] = (
            "peak resident set size of each rank's process over the timed steps (CPU: includes the Python runtime)"
        )
    else:
        notes["peak_mem_bytes"] = (
            "over the timed steps: max = allocator peak allocated, reserved_max = allocator peak reserved, "
            "device_used_max = driver's used memory at the end of the window (context and NCCL included)"
        )
    if loop.telemetry is not None:
        window = {"tokens": metrics["tokens_per_step"] * len(step_times), "window_s": loop.timed_window_s}
        metrics["telemetry"] = gather_telemetry(
            loop.telemetry, Path(point.point_dir), {**window, "device_type": device.type}
        )
    else:
        notes["telemetry"] = "not sampled (telemetry.enabled=false)"
    if loop.comm_bytes is None:
        notes["comm_bytes_per_step"] = "counted on the last warm-up step: needs train.warmup_steps >= 1"
    return {
        "schema_version": RECORD_SCHEMA_VERSION,
        "point_id": point.point_id,
        "sweep": spec["sweep"]["name"],
        "status": "ok",
        "error": None,
        "started_at": started,
        "finished_at": now_iso(),
        "wall_s": wall_s,
        "spec": spec,
        "recipe": point.recipe,
        "model_info": args.info(),
        "metrics": metrics,
        "env": env,
        "notes": notes,
        "log_dir": point.log_dir,
    }


def throughput_metrics(
    spec: dict, args: ModelArgs, step_times: list[float], device_name: str, point: LaunchPoint, launch: LaunchFile
):
    """tokens/s, step-time distribution, achieved TFLOP/s, MFU and HFU (null with a reason when unknown)."""
    train = spec["train"]
    world = spec["nodes"] * spec["gpus_per_node"]
    tokens_per_step = world * train["micro_batch"] * train["grad_accum"] * train["seq_len"]
    stats = step_time_stats(step_times)
    tokens_per_s = tokens_per_step / stats["median"]
    per_device = tokens_per_s / world
    model_flops = flops_per_token(args, train["seq_len"])
    hw_flops = hardware_flops_per_token(
        args,
        train["seq_len"],
        train["activation_checkpointing"],
        train.get("ac_every", DEFAULT_AC_EVERY),
        train.get("ac_save_ops"),
    )
    table = launch.peak_table
    peak, reason = lookup_peak_tflops(table, device_name, point.mfu_peak_dtype)
    metrics = {
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_device": per_device,
        "step_times_s": step_times,
        "step_time_s": stats,
        "tflops_per_device": per_device * model_flops / 1e12,
        "peak_flops_per_device": peak * 1e12 if peak else None,
        "mfu": per_device * model_flops / (peak * 1e12) if peak else None,
        "hfu": per_device * hw_flops / (peak * 1e12) if peak else None,
        "flops_per_token": model_flops,
        "tokens_per_step": tokens_per_step,
    }
    notes = {"mfu": reason, "hfu": reason} if reason else {}
    if point.fp8_peak_dtype:
        # fp8 runs: MFU above divides by the bf16 peak (torchtitan's and most published tables'
        # convention: attention, norms and the output layer stay bf16); this one by the fp8 peak.
        fp8_peak, _ = lookup_peak_tflops(table, device_name, point.fp8_peak_dtype)
        metrics["mfu_fp8_peak"] = per_device * model_flops / (fp8_peak * 1e12) if fp8_peak else None
        notes["mfu"] = (
            reason or "fp8: MFU against the bf16 peak (torchtitan's convention); mfu_fp8_peak against the fp8 peak"
        )
    return metrics, notes


def record_failure(point: LaunchPoint | PreflightTask, exc: BaseException) -> None:
    """Leave this rank's one-line reason where bench will look for it (never for an abandoned launch)."""
    if isinstance(exc, LaunchAbandoned) or not still_owned():
        return
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    message = f"{type(exc).__name__}: {first}".strip()
    oom = isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()
    error = RankError(
        int(os.environ.get("RANK", 0)), type(exc).__name__, message[:500], oom, traceback.format_exc()[-4000:]
    )
    if isinstance(exc, OSError):
        error.errno, error.filename = exc.errno, None if exc.filename is None else str(exc.filename)
    error.write(Path(point.point_dir))


def run_preflight_task(task: PreflightTask, launch: LaunchFile) -> None:
    """The launch's preflight, before its points, on the same ranks and process group."""
    spec = task.spec
    try:
        device = setup_device(spec["cluster"]["device_type"], spec["train"].get("threads_per_rank", 0))
        timeout = dt.timedelta(seconds=collective_timeout_s(spec["sweep"]["point_timeout_s"]))
        init_distributed(device, timeout, spec["train"]["cpu_offload"])
        set_collective_timeout(timeout)
        run_preflight(task, model_args(spec), device, timeout, launch.git, launch.harness)
    except BaseException as exc:  # noqa: BLE001 - the reason is left for the parent, then the launch ends
        record_failure(task, exc)
        raise


def run_launch(launch: LaunchFile | dict) -> None:
    """Run a launch's points in turn in this process; a failing point leaves its reason, then re-raises.

    Callable in-process (Ray Train's TorchTrainer uses it as train_loop_per_worker, with the
    process group already initialised, and hands it the launch file's content as a dict);
    `main` is the torchrun entry point around it.
    """
    launch = launch if isinstance(launch, LaunchFile) else LaunchFile.from_dict(launch)
    items = [p.point_dir for p in launch.points] + ([launch.preflight.point_dir] if launch.preflight else [])
    hold(launch.owner, sweep_dir_of(Path(items[0])) / SWEEP_LOCK if items else None)
    if launch.preflight is not None:
        run_preflight_task(launch.preflight, launch)
    for point in launch.points:
        try:
            run_point(point, launch)
        except BaseException as exc:  # noqa: BLE001 - every failure must leave its reason behind
            record_failure(point, exc)
            raise


def main(argv: list[str]) -> int:
    bind_to_agent()  # first: a rank never outlives its torchrun agent (fsdp_core/lifeline.py)
    launch = LaunchFile.read(Path(argv[0]))
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
