"""The planner's communication bytes equal the bytes real gloo runs count, exactly.

Every point of the shared `engine_records` launches (world sizes 1 and 2, every strategy,
fp32/bf16/bf16_pure, grad_accum 2) plus two launches of this file's own: hybrid_shard on a
2 x 2 mesh (shard within the "node", all-reduce across), and 3 ranks, where `debug`'s
dimensions do not divide and FSDP2 pads every parameter's dim 0 (64 -> 66, 172 -> 174, ...).
"""

from __future__ import annotations

import pytest
from dist_helpers import ENGINE_POINTS, debug_spec, run_engine

from bench.analysis.planner import predict

pytestmark = pytest.mark.ranks

OWN_POINTS = {
    "hybrid_shard/2x2": {"strategy": "hybrid_shard", "nodes": 2, "gpus_per_node": 2},
    "hybrid_shard/2x2/bf16": {"strategy": "hybrid_shard", "nodes": 2, "gpus_per_node": 2, "precision": "bf16"},
    "full_shard/ws3": {"strategy": "full_shard", "gpus_per_node": 3},
    "shard_grad_op/ws3/bf16": {"strategy": "shard_grad_op", "gpus_per_node": 3, "precision": "bf16"},
}


@pytest.fixture(scope="module")
def own_records(tmp_path_factory):
    specs = {label: debug_spec(**fields) for label, fields in OWN_POINTS.items()}
    by_id = run_engine(list(specs.values()), tmp_path_factory.mktemp("planner_comm"))
    return {label: by_id[spec.point_id] for label, spec in specs.items()}


def assert_predicted_equals_counted(record) -> None:
    assert record.status == "ok", record.error
    counted = record.metrics.comm_bytes_per_step.model_dump()
    assert predict(record.spec)["comm_bytes_per_step"] == counted


@pytest.mark.parametrize("label", list(ENGINE_POINTS))
def test_engine_points(engine_records, label):
    assert_predicted_equals_counted(engine_records[label])


@pytest.mark.parametrize("label", list(OWN_POINTS))
def test_hybrid_2x2_and_padded_3_ranks(own_records, label):
    assert_predicted_equals_counted(own_records[label])


def test_padding_is_real_on_3_ranks(own_records):
    # 4 bytes x (root 65,730 + 2 blocks x 46,428 padded elements), not 4 x 156,480.
    counted = own_records["full_shard/ws3"].metrics.comm_bytes_per_step
    assert counted.reduce_scatter == 4 * (65_730 + 2 * 46_428) == 634_344
