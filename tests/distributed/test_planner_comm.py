"""The planner's communication bytes equal the bytes real gloo runs count, exactly.

Every point of the shared `engine_records` launches (world sizes 1 and 2, every strategy,
fp32/bf16/bf16_pure, grad_accum 2) through the engine, and four points counted by the engine's
build and loop inside in-rank launches (engine_checks.loop_comm_bytes_report): hybrid_shard on a
2 x 2 mesh (shard within the "node", all-reduce across) with ws4_reports' ranks, and 3 ranks in a
launch of this file's own, where `debug`'s dimensions do not divide and FSDP2 pads every
parameter's dim 0 (64 -> 66, 172 -> 174, ...).
"""

from __future__ import annotations

import pytest
from dist_helpers import ENGINE_POINTS, LOOP_POINTS_2X2, debug_spec, run_ranks, spec_jobs

from bench.analysis.planner import predict

pytestmark = pytest.mark.ranks

WS3_POINTS = {
    "full_shard/ws3": {"strategy": "full_shard", "gpus_per_node": 3},
    "shard_grad_op/ws3/bf16": {"strategy": "shard_grad_op", "gpus_per_node": 3, "precision": "bf16"},
}
LOOP_POINTS = {**LOOP_POINTS_2X2, **WS3_POINTS}


@pytest.fixture(scope="module")
def loop_counts(ws4_reports, tmp_path_factory) -> dict[str, list[dict[str, int]]]:
    """label -> every rank's counted bytes per step, for LOOP_POINTS."""
    jobs = {"loop_comm": ("engine_checks:loop_comm_bytes_report", {"specs": spec_jobs(WS3_POINTS)})}
    ws3_reports = run_ranks(3, jobs, tmp_path_factory.mktemp("planner_comm_ws3"))
    return {
        label: [rank["loop_comm"][label] for rank in reports]
        for reports, points in ((ws4_reports, LOOP_POINTS_2X2), (ws3_reports, WS3_POINTS))
        for label in points
    }


def assert_predicted_equals_counted(record) -> None:
    assert record.status == "ok", record.error
    counted = record.metrics.comm_bytes_per_step.model_dump()
    assert predict(record.spec)["comm_bytes_per_step"] == counted


@pytest.mark.parametrize("label", list(ENGINE_POINTS))
def test_engine_points(engine_records, label):
    assert_predicted_equals_counted(engine_records[label])


@pytest.mark.parametrize("label", list(LOOP_POINTS))
def test_hybrid_2x2_and_padded_3_ranks(loop_counts, label):
    predicted = predict(debug_spec(**LOOP_POINTS[label]))["comm_bytes_per_step"]
    assert loop_counts[label] == [predicted] * len(loop_counts[label])  # every rank counts the same


def test_padding_is_real_on_3_ranks(loop_counts):
    # 4 bytes x (root 65,730 + 2 blocks x 46,428 padded elements), not 4 x 156,480.
    assert [counted["reduce_scatter"] for counted in loop_counts["full_shard/ws3"]] == [4 * (65_730 + 2 * 46_428)] * 3
    assert 4 * (65_730 + 2 * 46_428) == 634_344
