"""RunSpec validation and identity, launch rules, RunResult round trips, the typed launch file
(bench/schema, bench/analysis/records.py)."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from bench.analysis.records import read_record, write_record
from bench.config.compose import spec_from_fields
from bench.config.problems import ConfigError, describe_validation_error
from bench.config.rules import launch_problems
from bench.schema.base import STATUSES
from bench.schema.env import EnvInfo
from bench.schema.record import (
    SCHEMA_VERSION,
    CommBytes,
    Metrics,
    RunResult,
    StepTimeStats,
    model_info,
    rank_record_json,
    recipe_of,
)
from bench.schema.spec import RunSpec


def spec(**fields) -> RunSpec:
    return spec_from_fields(**{"model": "debug", **fields})


def config_errors(**fields) -> list[str]:
    with pytest.raises(ConfigError) as info:
        spec(**fields)
    return info.value.lines


def errors_of(data: dict) -> list[str]:
    with pytest.raises(ValidationError) as info:
        RunSpec.model_validate(data)
    return describe_validation_error(info.value)


def ok_record(**spec_fields) -> RunResult:
    run = spec(**spec_fields)
    return RunResult(
        point_id=run.point_id,
        sweep=run.sweep.name,
        status="ok",
        spec=run,
        recipe=recipe_of(run),
        model_info=model_info(run),
        metrics=Metrics(
            tokens_per_s=1000.0,
            step_times_s=[0.1, 0.2],
            step_time_s=StepTimeStats(median=0.15, mean=0.15, p10=0.11, p90=0.19, cv=0.33),
            comm_bytes_per_step=CommBytes(all_gather=3, reduce_scatter=2, all_reduce=1),
            losses=[6.9, 6.8],
        ),
        env=EnvInfo(torch="2.13.0+cpu", hostnames=["a", "b"], env_vars={"NCCL_DEBUG": "INFO"}),
    )


def test_defaults_are_resolved():
    run = spec(nodes=2, gpus_per_node=2, micro_batch=3, grad_accum=2)
    assert run.train.seq_len == run.model.default_seq_len == 64  # null means the model's default
    assert run.world_size == 4
    assert run.tokens_per_step == 4 * 3 * 2 * 64
    assert (run.strategy, run.precision, run.launcher, run.sweep.name) == ("full_shard", "fp32", "local", "adhoc")


def test_point_id_is_a_content_hash_of_what_is_measured():
    base = spec()
    assert re.fullmatch(r"[0-9a-f]{12}", base.point_id)
    assert spec().point_id == base.point_id
    # Where and how patiently a point runs does not change its identity...
    assert spec(**{"sweep.name": "other", "sweep.point_timeout_s": 5}).point_id == base.point_id
    # ...nor a cluster fact the measurement does not depend on (a planner input)...
    assert spec(cluster={"inter_node_gbps": 400}).point_id == base.point_id
    # ...what it measures does, the model's shape included.
    changed = [spec(micro_batch=2), spec(repeat=1), spec(seq_len=32), spec(debug={"slow_fraction": 0.1}),
               spec(model={"n_layers": 1})]  # fmt: skip
    assert len({base.point_id, *(s.point_id for s in changed)}) == 6


def test_unknown_fields_are_rejected_naming_them():
    data = spec().model_dump(mode="json")
    assert errors_of({**data, "train": {**data["train"], "micro_batches": 2}}) == [
        "train.micro_batches: Extra inputs are not permitted"
    ]
    assert errors_of({**data, "debug": {"fail": 1}}) == ["debug.fail: Extra inputs are not permitted"]


def test_literal_errors_name_the_allowed_values():
    data = spec().model_dump(mode="json")
    assert errors_of({**data, "strategy": "zero3"}) == [
        "strategy: got 'zero3'; allowed: 'full_shard', 'shard_grad_op', 'hybrid_shard', 'hybrid_shard_zero2' "
        "or 'no_shard'"
    ]
    assert errors_of({**data, "precision": "int8"})[0].startswith("precision: got 'int8'; allowed: 'fp32', 'bf16',")


def test_launch_rules_are_reported_together():
    lines = config_errors(
        seq_len=4096, steps=2, warmup_steps=2, precision="fp8", debug={"fail_rank": 3, "fail_step": 0}
    )
    assert lines == [
        "train.seq_len: 4096 exceeds debug's maximum 512",
        "train.warmup_steps: must be fewer than train.steps (2 >= 2)",
        "precision: fp8 needs a CUDA GPU (fp8 linears (torchao), bf16 elsewhere); allowed on cpu: fp32, bf16, "
        "bf16_pure, fp16",
        "debug.fail_rank: 3 is not a rank of this point; allowed: 0..0",
    ]


def test_launch_rules_never_make_a_stored_record_unreadable(tmp_path):
    # A record measured under rules that later tightened (compile with one warm-up step) still reads.
    record = ok_record(compile=True, compile_backend="aot_eager")
    old = record.model_copy(
        update={
            "spec": record.spec.model_copy(update={"train": record.spec.train.model_copy(update={"warmup_steps": 1})})
        }
    )
    assert launch_problems(old.spec) == ["train.warmup_steps: train.compile=true needs at least 2 warm-up steps, got 1"]
    write_record(old, tmp_path / "result.json")
    assert read_record(tmp_path / "result.json").spec.train.warmup_steps == 1


def test_fault_knobs_must_target_an_existing_rank_and_step():
    assert spec(nodes=2, steps=4, debug={"fail_rank": 1, "fail_step": 3}).debug.fail_rank == 1
    assert config_errors(nodes=2, steps=4, debug={"fail_rank": 1, "fail_step": 4}) == [
        "debug.fail_step: 4 is not a step of this point; allowed: 0..3"
    ]


def test_gpu_only_options_are_refused_on_cpu_and_gpu_facts_resolved():
    assert config_errors(cpu_offload=True)[0].startswith("train.cpu_offload: ")
    gpu = spec(cluster="h100-8x", precision="fp8", cpu_offload=True)
    assert gpu.cluster.peak_tflops["fp8"] == 1978.9 and gpu.device_type == "cuda"


def test_cluster_values_must_make_physical_sense():
    assert config_errors(cluster="tpu-v5")[0].startswith("cluster: unknown cluster 'tpu-v5'; allowed: a100-8x, ")
    assert config_errors(cluster="h100-8x", **{"cluster.inter_node_gbps": 0}) == [
        "cluster.inter_node_gbps: must be positive, got 0"
    ]


def test_record_round_trips_through_json(tmp_path):
    record = ok_record(nodes=2)
    assert RunResult.model_validate_json(record.model_dump_json()) == record
    path = tmp_path / "adhoc" / record.point_id / "result.json"
    write_record(record, path)
    assert read_record(path) == record
    assert not list(path.parent.glob(".*.tmp"))  # written atomically: the temp file was renamed
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION == 4


def test_the_rank_writes_the_fields_it_set_and_they_read_back_as_the_record(tmp_path):
    """rank_record_json: an unmeasured section has no key (as rank 0 always wrote it), the version
    always has one, and the file reads back to the same RunResult."""
    record = ok_record()  # schema_version left at its default: still written, first
    written = rank_record_json(record)
    assert written["schema_version"] == SCHEMA_VERSION and list(written)[0] == "schema_version"
    assert "telemetry" not in written["metrics"] and "checkpoint" not in written["metrics"]
    assert "prediction" not in written and "preflight" not in written
    assert set(written["metrics"]) == {"tokens_per_s", "step_times_s", "step_time_s", "comm_bytes_per_step", "losses"}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(written))
    assert read_record(path) == record


def test_the_launch_file_is_typed_and_keeps_its_field_names(tmp_path):
    """Written from RunSpec, Recipe and PreflightSettings, read back into them (the ranks validate
    what they get); the JSON keeps the names both sides have always read."""
    from bench.schema.options import PreflightSettings
    from bench.schema.protocol import LaunchFile, LaunchPoint, PreflightTask

    run = spec(nodes=2)
    point = LaunchPoint(point_id=run.point_id, point_dir="/r/adhoc/p", spec=run, recipe=recipe_of(run),
                        mfu_peak_dtype="fp32")  # fmt: skip
    task = PreflightTask(point_dir="/r/adhoc/_preflight/2x1", spec=run, settings=PreflightSettings(iters=3))
    launch = LaunchFile(points=[point], preflight=task, git={"sha": "abc"}, owner="t")
    path = tmp_path / "launch.json"
    launch.write(path)
    data = json.loads(path.read_text())
    assert list(data) == [
        "points", "peak_table", "git", "harness", "preflight", "conditions", "owner", "max_failures",
    ]  # fmt: skip
    assert list(data["points"][0]) == [
        "point_id", "point_dir", "spec", "recipe", "mfu_peak_dtype", "fp8_peak_dtype", "log_dir",
    ]  # fmt: skip
    assert data["points"][0]["spec"] == run.model_dump(mode="json")
    assert list(data["preflight"]) == ["point_dir", "spec", "settings", "strategies"]
    back = LaunchFile.read(path)
    assert back == launch and isinstance(back.points[0].spec, RunSpec)
    assert back.points[0].spec.point_id == run.point_id and back.preflight.settings.iters == 3
    data["points"][0]["spec"]["train"]["steps"] = 0  # a launch file the ranks' schema refuses
    path.write_text(json.dumps(data))
    with pytest.raises(ValidationError, match="points.0.spec.train.steps"):
        LaunchFile.read(path)


def test_failure_records_need_no_metrics():
    for status in ("oom", "failed", "timeout", "invalid"):
        failed = ok_record().model_copy(update={"status": status, "error": "rank 1: boom", "metrics": Metrics()})
        assert RunResult.model_validate_json(failed.model_dump_json()).metrics.tokens_per_s is None
    assert {"ok", "oom", "failed", "timeout", "invalid"} <= set(STATUSES)


def test_bad_records_are_reported_in_one_line(tmp_path):
    path = tmp_path / "result.json"
    data = json.loads(ok_record().model_dump_json())
    path.write_text(json.dumps({**data, "schema_version": 9}))
    with pytest.raises(
        ValueError, match=r"^schema_version 9 is unknown to this fsdp-bench \(it reads versions up to 4\)"
    ):
        read_record(path)
    data["metrics"]["tokens_per_sec"] = 1.0
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"first: metrics.tokens_per_sec: Extra inputs are not permitted"):
        read_record(path)
    path.write_text(json.dumps(data)[:100])
    with pytest.raises(ValueError, match="^unreadable JSON: "):
        read_record(path)


def test_env_fingerprint_ignores_hosts_and_variables():
    env = ok_record().env
    assert env.fingerprint() == {
        "torch": "2.13.0+cpu",
        "cuda": None,
        "nccl": None,
        "device_name": None,
        "platform": None,
    }
