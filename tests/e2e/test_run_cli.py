"""`fsdp-bench run` as a user runs it: real torchrun agents, records, failures, timeouts, bad input.

The launched points are `debug` with 4 short steps; each costs mostly interpreter start-up and
rendezvous (~10 s on two shared cores). Bad input is checked in-process through the same
`bench.cli.main.main` the console script calls (tests/bench_cli.py: nothing may launch, so nothing
slow happens), plus runs of the console script with shell metacharacters.
"""

from __future__ import annotations

import importlib.metadata
import os
import re

import pytest
from bench_cli import in_process

from bench.analysis.records import read_record
from bench.config.compose import flavors
from bench.config.version import harness_version
from bench.schema.protocol import GitInfo

SHORT = ["model=debug", "train.steps=4", "train.warmup_steps=1", "train.seq_len=32"]
HANG_TIMEOUT_S = 10
# A hang ends within the point timeout plus the time before the worker marks the point started
# (interpreter, torch import, rendezvous: ~10 s here, at most STARTUP_GRACE_S) plus the kill grace
# (SIGTERM, 5 s, then SIGKILL).
HANG_LIMIT_S = HANG_TIMEOUT_S + 60


@pytest.fixture(scope="module")
def ok_run(tmp_path_factory, fsdp_bench):
    """One nodes=2 run whose sweep name (a folder name) is full of shell metacharacters, with two
    profiled steps after its timed ones."""
    root = tmp_path_factory.mktemp("ok")
    canary = root / "pwned"
    sweep = f"e2e; touch {canary} $(touch {canary}) `touch {canary}` | tee {canary} & x"
    results = root / "results"
    run = fsdp_bench(
        "run", *SHORT, "nodes=2", "profile.enabled=true", "profile.steps=2", "profile.memory_categories=true",
        f'sweep.name="{sweep}"',
        f"results_dir={results}", results=results,
    )  # fmt: skip
    return run, results, sweep, canary


@pytest.mark.ranks
def test_run_nodes2_writes_a_valid_ok_record(ok_run, worker_processes):
    run, results, sweep, canary = ok_run
    assert run.rc == 0, run.stdout + run.stderr
    (record,) = run.records
    path = results / sweep / record.point_id / "result.json"
    assert read_record(path) == record  # validated by RunResult, at the contract's path
    assert f"record: {path}" in run.stdout and "status=ok" in run.stdout
    assert not canary.exists()
    assert record.status == "ok" and record.error is None
    assert (record.spec.nodes, record.spec.gpus_per_node, record.spec.world_size) == (2, 1, 2)
    assert record.spec.sweep.name == sweep
    assert worker_processes(results) == []


@pytest.mark.ranks
def test_ok_record_metrics(ok_run):
    record = ok_run[0].records[0]
    m = record.metrics
    assert m.tokens_per_step == 2 * 32
    assert m.tokens_per_s > 0 and m.tokens_per_s == pytest.approx(64 / m.step_time_s.median)
    assert m.tokens_per_s_per_device == pytest.approx(m.tokens_per_s / 2)
    assert len(m.step_times_s) == 3 and len(m.losses) == 4  # timed steps; every step's loss
    assert (m.loss_first, m.loss_last) == (m.losses[0], m.losses[-1])
    assert m.step_time_s.p10 <= m.step_time_s.median <= m.step_time_s.p90
    # A CPU is not in the peak-FLOPs table: MFU is null with the reason, never another device's peak.
    assert m.mfu is None and m.hfu is None and "peak-FLOPs table" in record.notes["mfu"]
    assert len(m.peak_mem_bytes.per_rank) == 2 and m.peak_mem_bytes.max == max(m.peak_mem_bytes.per_rank)
    params, blocks = flavors()["debug"].params, flavors()["debug"].n_layers * flavors()["debug"].block_params
    assert m.comm_bytes_per_step.model_dump() == {
        "all_gather": (params + blocks) * 4,
        "reduce_scatter": params * 4,
        "all_reduce": 0,
    }
    assert record.model_info.params == params == 156_480
    # One more step under FSDP2's memory tracker: fp32 parameters sharded over 2 ranks to the byte, AdamW's
    # two states of them (plus its step counters), every category adding up to the total.
    categories = m.peak_mem_by_category
    assert categories["Sharded Param"] == params * 4 // 2
    assert categories["OptState"] == pytest.approx(2 * params * 4 // 2, rel=1e-3)
    assert categories["Total"] == sum(v for k, v in categories.items() if k != "Total")
    assert {"Unsharded Param", "Activation", "Temp", "All Gather", "Reduce Scatter"} <= set(categories)


@pytest.mark.ranks
def test_ok_record_telemetry_and_its_series(ok_run):
    run, results, sweep, _ = ok_run
    (record,) = run.records
    t = record.metrics.telemetry
    assert (t.ranks, t.interval_ms, t.sidecar) == (2, 100, "telemetry.parquet")
    assert (results / sweep / record.point_id / t.sidecar).stat().st_size > 0
    assert [r.rank for r in t.per_rank] == [0, 1] and all(r.samples >= 2 for r in t.per_rank)
    assert f"series in {t.sidecar}" in run.stdout


@pytest.mark.ranks
def test_ok_record_step_breakdown_and_its_traces(ok_run):
    """profile.enabled: each rank's trace beside the record, the split in the record and its console
    line; the profiled steps are not timed ones (3 step times, 4 losses above) and keep the point's id."""
    run, results, sweep, _ = ok_run
    (record,) = run.records
    b = record.metrics.step_breakdown
    assert (b.device, b.steps, b.traces) == ("cpu", 2, ["trace_rank0.json.gz", "trace_rank1.json.gz"])
    point = results / sweep / record.point_id
    assert sorted(p.name for p in point.glob("trace_rank*")) == b.traces
    assert [(point / name).stat().st_size for name in b.traces] == b.trace_gzip_bytes_per_rank
    assert b.calls_per_step == {"all_gather": 5, "reduce_scatter": 3} and b.overlapped_comm_s == 0.0
    assert b.compute_s + b.exposed_comm_s + b.idle_s == pytest.approx(b.step_s, rel=0.05)
    assert b.exposed_comm_share == pytest.approx(b.exposed_comm_s / b.step_s)
    assert len(b.idle_s_per_rank) == 2 and b.fsdp_s is not None and b.barrier_s is not None
    assert record.point_id == record.spec.model_copy(update={"profile": type(record.spec.profile)()}).point_id
    line = next(line for line in run.stdout.splitlines() if line.startswith("  step split:"))
    assert f"exposed share {100 * b.exposed_comm_share:.1f}%" in line
    assert "over 2 profiled steps, traces trace_rank0.json.gz .. trace_rank1.json.gz" in line


@pytest.mark.ranks
def test_ok_record_environment(ok_run):
    env = ok_run[0].records[0].env
    assert env.torch == importlib.metadata.version("torch")
    assert env.cuda is None and env.nccl is None
    assert env.device_name.startswith("cpu")
    assert len(env.hostnames) == 1 and env.hostnames[0]
    assert env.harness == harness_version(GitInfo(sha=env.git_sha, dirty=env.git_dirty))  # from the launch file
    assert re.fullmatch(r"[0-9a-f]{40}", env.git_sha) and env.git_dirty in (True, False)
    assert env.python.count(".") == 2 and env.platform.startswith("Linux")
    # Each rank's thread pool is sized so the 2 ranks on this host never oversubscribe its cores.
    assert env.env_vars["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))


@pytest.mark.ranks
def test_failing_rank_gives_a_failed_record_naming_it(tmp_path, fsdp_bench, worker_processes):
    results = tmp_path / "results"
    knobs = ["debug.fail_rank=1", "debug.fail_step=2"]
    # Two ranks under one torchrun agent: the rank is named, whatever node it is on.
    rc, stdout, _, records = fsdp_bench(
        "run", *SHORT, "gpus_per_node=2", *knobs, f"results_dir={results}", results=results
    )
    assert rc == 1
    (record,) = records
    assert record.status == "failed"
    assert record.error == "rank 1: RuntimeError: debug: injected failure on rank 1 at step 2"
    assert f"error: {record.error}" in stdout
    assert worker_processes(results) == []


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_hanging_rank_times_out_and_leaves_no_process(tmp_path, fsdp_bench, worker_processes):
    results = tmp_path / "results"
    knobs = ["debug.fail_rank=1", "debug.fail_step=1", "debug.hang=true", f"sweep.point_timeout_s={HANG_TIMEOUT_S}"]
    run = fsdp_bench("run", *SHORT, "gpus_per_node=2", *knobs, f"results_dir={results}", results=results)
    assert run.rc == 1
    (record,) = run.records
    assert record.status == "timeout"
    assert f"sweep.point_timeout_s={HANG_TIMEOUT_S} s" in record.error
    # The ranks' Flight Recorder dumps name the culprit: rank 1 never reached step 1's opening barrier.
    hang = record.hang
    assert (hang.collective.kind, hang.collective.group_desc) == ("gloo:barrier", "default_pg")
    assert hang.collective.meaning == "the step timer's opening barrier of step 1"
    assert (hang.entered, [m.rank for m in hang.missing], hang.dumped_ranks) == ([0], [1], [0, 1])
    assert hang.missing[0].doing == "debug.hang of step 1"
    assert record.error.startswith(f"hung: rank 1 never entered collective {hang.collective.seq} of default_pg")
    assert HANG_TIMEOUT_S <= record.wall_s < HANG_LIMIT_S
    assert run.elapsed_s < HANG_LIMIT_S
    assert worker_processes(results) == []


@pytest.mark.ranks
def test_out_of_memory_gives_status_oom(tmp_path, fsdp_bench):
    results = tmp_path / "results"
    knobs = ["debug.oom=true", "debug.fail_rank=0", "debug.fail_step=1"]
    rc, _, _, records = fsdp_bench("run", *SHORT, *knobs, f"results_dir={results}", results=results)
    assert rc == 1
    (record,) = records
    assert (record.status, record.error) == (
        "oom",
        "rank 0: OutOfMemoryError: debug: injected out-of-memory on rank 0 at step 1; in debug.oom of step 1",
    )


# overrides -> the start of the one error line (field, then the allowed values)
BAD_INPUT = {
    "model=nope": "model: unknown model 'nope'; allowed: debug, llama2-13b,",
    "strategy=zero9": "strategy: unknown strategy 'zero9'; allowed: full_shard, hybrid_shard,",
    "precision=fp4": "precision: unknown precision 'fp4' (did you mean fp8?); allowed: bf16, bf16_pure, fp16, fp32, fp8",
    "cluster=tpu": "cluster: unknown cluster 'tpu'; allowed: a100-8x,",
    "launcher=mpi": "launcher: unknown launcher 'mpi'; allowed: kubeflow, local, ray, slurm",
    "nodes=0": "nodes: Input should be greater than or equal to 1",
    "nodes=1.5": "nodes: Input should be a valid integer",
    "gpus_per_node=0": "gpus_per_node: Input should be greater than or equal to 1",
    "gpus_per_node=two": "gpus_per_node: Input should be a valid integer",
    "train.micro_batch=0": "train.micro_batch: Input should be greater than or equal to 1",
    "train.seq_len=0": "train.seq_len: Input should be greater than or equal to 1",
    "train.warmup_steps=8": "train.warmup_steps: must be fewer than train.steps (8 >= 8)",
    "train.grad_accum=0": "train.grad_accum: Input should be greater than or equal to 1",
    "precision=fp8": "precision: fp8 needs a CUDA GPU (fp8 linears (torchao), bf16 elsewhere); allowed on cpu: fp32,",
    "train.seq_len=513": "train.seq_len: 513 exceeds debug's maximum 512",
    "train.activation_checkpointing=some": (
        "train.activation_checkpointing: got 'some'; allowed: 'none', 'full', 'selective_op' or 'selective_layer'"
    ),
    "train.ac_every=0": "train.ac_every: Input should be greater than or equal to 1",
    "train.ac_every=3": "train.ac_every: tunes selective_layer only, but train.activation_checkpointing is none",
    "train.ac_save_ops=[mm,attention]": (
        "train.ac_save_ops: unknown op group 'attention'; allowed: mm, sdpa, collectives, max"
    ),
    "debug.fail_rank=1": "debug.fail_rank: 1 is not a rank of this point; allowed: 0..0",
    "debug.comm_delay_ms=20": "debug.comm_delay_ms: needs a world size above 1 (no peer waits for a late rank)",
    "debug.comm_delay_ms=-1": "debug.comm_delay_ms: Input should be greater than or equal to 0",
    "debug.extra_matmuls=-1": "debug.extra_matmuls: Input should be greater than or equal to 0",
    "profile.steps=0": "profile.steps: Input should be greater than or equal to 1",
    "profile.max_mib=0": "profile.max_mib: Input should be greater than 0",
    "profile.every_repeats=0": "profile.every_repeats: Input should be greater than or equal to 1",
    "profile.memory_history=true": "profile.memory_history: needs a CUDA cluster; local-cpu's device_type is cpu",
    "profile.memory_history_entries=0": "profile.memory_history_entries: Input should be greater than 0",
    "profile.memory_categories=yes": "profile.memory_categories: got 'yes'; allowed: true, false",
    "nodes=true": "nodes: Input should be a valid integer",
    "nodes=null": "nodes: Input should be a valid integer",
    "train.micro_batch=true": "train.micro_batch: Input should be a valid integer",
    "model.n_layers=0": "model.n_layers: Input should be greater than or equal to 1",
    "model.dim=-64": "model.dim: Input should be greater than or equal to 1",
    "cluster=h100-8x": "cluster: h100-8x needs CUDA GPUs and this host has none; allowed here: cluster=local-cpu",
    "train.stepz=3": "train.stepz: unknown key 'stepz' (did you mean steps?); allowed under train: ac_every, ac_save_ops,",
    "train.cpu_offload=true": "train.cpu_offload: offloads GPU state to host memory, so it needs a CUDA cluster",
}


@pytest.mark.parametrize("override", list(BAD_INPUT))
def test_bad_input_is_one_line_exit_2_and_launches_nothing(tmp_path, override):
    results = tmp_path / "results"
    rc, _, err, _ = in_process("run", "model=debug", override, f"results_dir={results}")
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith(f"error: {BAD_INPUT[override]}"), err
    assert not results.exists()


@pytest.mark.parametrize(
    "override",
    ["model=tiny; touch {canary}", "strategy=$(touch {canary})", "precision=fp32`touch {canary}`"],
)
@pytest.mark.ranks
def test_shell_metacharacters_are_inert(tmp_path, fsdp_bench, override):
    canary, results = tmp_path / "pwned", tmp_path / "results"
    rc, _, stderr, _ = fsdp_bench("run", override.format(canary=canary), f"results_dir={results}", timeout=60)
    field = override.partition("=")[0]
    assert rc == 2
    assert stderr.startswith(f"error: {field}: unknown {field} ") and "; allowed: " in stderr
    assert stderr.count("\n") == 1
    assert not canary.exists() and not results.exists()
