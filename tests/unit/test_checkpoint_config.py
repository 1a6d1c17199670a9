"""Checkpoint settings: launch rules, identity, the local launcher's folder checks, the planner's closed
form and the report's checkpoint view (records built by hand: every expected value is known)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.analysis.planner.checkpoint import checkpoint_state_bytes, parameter_tensors, predict_checkpoint
from bench.analysis.planner.workload import workload_from_spec
from bench.config.compose import spec_from_fields
from bench.config.problems import ConfigError
from bench.run.launch.local import LocalLauncher
from bench.schema.checkpoint import CheckpointLoad, CheckpointMetrics, CheckpointSave, write_bandwidth
from bench.schema.protocol import CheckpointMarker, checkpoint_location, default_checkpoint_dir
from bench.schema.spec import TrainSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.report.frame import records_to_frame  # noqa: E402
from reports.report.checkpoint import checkpoint_figure, checkpoint_table  # noqa: E402


def spec(**fields):
    return spec_from_fields(**{"model": "debug", **fields})


def config_errors(**fields) -> list[str]:
    with pytest.raises(ConfigError) as info:
        spec(**fields)
    return info.value.lines


def test_bad_checkpoint_settings_are_one_line_each_before_launch():
    assert config_errors(checkpoint="sometimes") == [
        "train.checkpoint: got 'sometimes'; allowed: 'none', 'sync' or 'async'"
    ]
    assert config_errors(checkpoint="sync", checkpoint_every=0) == [
        "train.checkpoint_every: Input should be greater than or equal to 1"
    ]
    assert config_errors(checkpoint="sync", steps=8, warmup_steps=2, checkpoint_every=7) == [
        "train.checkpoint_every: 7 is beyond the 6 timed steps (train.steps - train.warmup_steps); allowed: 1..6"
    ]
    assert spec(checkpoint_every=2).point_id == spec().point_id  # no saves: the interval is dropped
    assert spec(checkpoint="async", steps=8, warmup_steps=2, checkpoint_every=6).train.checkpoint_every == 6


def test_checkpointing_changes_the_point_id_but_its_place_and_resuming_do_not():
    plain = spec()
    assert "checkpoint" not in plain.identity()["train"]  # points measured before keep their ids
    assert "checkpoint_every" not in plain.identity()["train"]
    assert spec(checkpoint="sync").point_id != plain.point_id
    assert spec(checkpoint="sync", checkpoint_every=2).point_id != spec(checkpoint="sync").point_id
    assert (
        spec(checkpoint="sync", checkpoint_dir="/elsewhere", resume=True).point_id == spec(checkpoint="sync").point_id
    )
    assert spec(**{"cluster.storage_gbps": 400}).point_id == plain.point_id


def test_saves_follow_every_kth_timed_step_and_null_means_after_the_last():
    def steps(every):
        train = TrainSpec(steps=8, warmup_steps=2, checkpoint="sync", checkpoint_every=every)
        return [s for s in range(8) if train.saves_after(s)], checkpoint_location(train, "/p")

    assert steps(2) == ([3, 5, 7], str(default_checkpoint_dir("/p")))
    assert steps(None)[0] == [7]
    assert steps(4)[0] == [5]
    assert TrainSpec(steps=8, warmup_steps=2, checkpoint_every=2).saves_after(3) is False  # checkpoint=none
    assert checkpoint_location(TrainSpec(checkpoint="sync", checkpoint_dir="s3://b/run"), "/p") == "s3://b/run"


def test_local_launcher_refuses_an_unwritable_folder_and_a_resume_without_checkpoint(tmp_path):
    launcher = LocalLauncher()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert launcher.check_point(spec(checkpoint="sync", checkpoint_dir=str(blocker / "ckpt")), tmp_path) == [
        f"train.checkpoint_dir: {blocker}/ckpt is not writable ({blocker} is not a folder)"
    ]
    resumed = spec(checkpoint="sync", resume=True)
    folder = default_checkpoint_dir(tmp_path / "adhoc" / resumed.point_id)
    assert launcher.check_point(resumed, tmp_path) == [
        f"train.resume: no complete checkpoint in {folder} (no 'latest' marker naming a step folder with DCP "
        "metadata); allowed: false, or a train.checkpoint_dir holding one"
    ]
    (folder / "step-00000003").mkdir(parents=True)
    (folder / "latest").write_text(CheckpointMarker(3, "step-00000003", 2).to_json())
    assert launcher.check_point(resumed, tmp_path) != []  # a marker without DCP's metadata is incomplete
    (folder / "step-00000003" / ".metadata").write_bytes(b"")
    assert launcher.check_point(resumed, tmp_path) == []
    assert launcher.check_point(spec(checkpoint="sync", checkpoint_dir="s3://bucket/run"), tmp_path) == []


def test_planner_checkpoint_bytes_are_params_and_both_adam_moments_in_fp32_plus_step_scalars():
    debug = workload_from_spec(spec())
    assert parameter_tensors(debug) == 2 * 9 + 3
    assert checkpoint_state_bytes(debug) == 12 * debug.shape.params + 4 * 21
    llama70 = workload_from_spec(spec_from_fields(model="llama2-70b", cluster="p5.48xlarge", nodes=16, gpus_per_node=8))
    assert checkpoint_state_bytes(llama70) == 12 * 68_976_648_192 + 4 * (80 * 9 + 3) == 827_719_781_196


def test_planner_checkpoint_time_blocked_and_goodput():
    w = workload_from_spec(spec_from_fields(model="llama2-70b", cluster="p5.48xlarge", nodes=16, gpus_per_node=8,
                                            **{"cluster.storage_gbps": 800}))  # fmt: skip
    state = checkpoint_state_bytes(w)
    sync = predict_checkpoint(w, step_time_s=2.0, mode="sync", every=100)
    assert sync["write_s"] == pytest.approx(state / 100e9)  # 800 Gbit/s = 100 GB/s
    assert sync["blocked_s"] == sync["write_s"]
    assert sync["goodput"] == pytest.approx(200 / (200 + sync["write_s"]))
    fast = predict_checkpoint(w, step_time_s=2.0, mode="async", every=100)
    assert fast["blocked_s"] == pytest.approx(state / 128 / 64e9)  # staging over the H100's 64 GB/s host link
    slow = predict_checkpoint(w, step_time_s=2.0, mode="async", every=1)  # the previous save is still writing
    assert slow["blocked_s"] == pytest.approx(fast["blocked_s"] + sync["write_s"] - 2.0)
    cpu = predict_checkpoint(workload_from_spec(spec()), step_time_s=0.1, mode="async", every=1)
    assert (cpu["blocked_s"], cpu["goodput"]) == (None, None)  # no host-link figure for a CPU host


def checkpointed_record(nodes: int, durable: list[float], prediction: dict | None = None):
    record = make_record(nodes=nodes, checkpoint="sync", checkpoint_every=1, prediction=prediction)
    saves = [CheckpointSave(step=i + 1, blocked_s=d + 0.01, durable_s=d, bytes=2_000_000, bytes_per_rank=[2_000_000],
                            state_bytes_per_rank=[1_877_844], write_bytes_per_s=2_000_000 / d)
             for i, d in enumerate(durable)]  # fmt: skip
    section = CheckpointMetrics(mode="sync", every=1, dir="/ckpt", saves=saves, blocked_s=sum(s.blocked_s for s in saves),
                                write_bytes_per_s=write_bandwidth((s.bytes, s.durable_s) for s in saves),  # as the ranks
                                load=CheckpointLoad(step=3, load_s=0.5, bytes=2_000_000, read_bytes_per_s=4e6),
                                tokens_per_s_with_checkpoints=800.0, goodput=0.8, blocked_fraction=0.1)  # fmt: skip
    record.metrics.checkpoint = section
    return record


def test_report_reads_medians_per_save_and_shows_predicted_beside_measured():
    prediction = {"checkpoint": {"state_bytes": 1_877_844, "write_s": 0.05, "storage_gbps": 1.6, "goodput": 0.9}}
    records = [checkpointed_record(1, [0.1, 0.3, 0.2], prediction), checkpointed_record(2, [0.4, 0.4]),
               make_record(nodes=4)]  # fmt: skip
    frame = records_to_frame(records)
    one = frame[frame["nodes"] == 1].iloc[0]
    assert (one["ckpt_saves"], one["ckpt_durable_s"], one["ckpt_blocked_s"]) == (3, 0.2, pytest.approx(0.21))
    assert one["ckpt_write_bytes_per_s"] == pytest.approx(2_000_000 / 0.2)
    assert (one["ckpt_state_bytes"], one["pred_ckpt_write_s"], one["ckpt_goodput"]) == (1_877_844, 0.05, 0.8)
    assert one["variant"] == "train.checkpoint=sync train.checkpoint_every=1"  # overrides a rerun takes
    table = checkpoint_table(frame)
    assert len(table.rows) == 2  # the point without checkpoints has no row
    row = dict(zip(table.columns, table.rows[0]))
    assert (row["nodes"], row["saves"], row["durable s/save"], row["write GB/s"], row["goodput"]) == (
        "1",
        "3",
        "0.2",
        "0.01",
        "80.0 %",
    )
    assert (row["predicted durable s"], row["predicted goodput"]) == ("0.05", "90.0 %")
    fig = checkpoint_figure(frame)
    size_panel, bandwidth_panel = fig.axes
    assert sorted(line.get_gid() for line in size_panel.lines) == ["durable:1", "durable:2", "predicted:1"]
    assert [line.get_gid() for line in bandwidth_panel.lines] == ["write:debug", "read:debug", None]
    assert checkpoint_figure(records_to_frame([make_record()])) is None
