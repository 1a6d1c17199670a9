"""FSDP2 sharding as the engine applies it, observed inside real gloo ranks (rank_checks.py).

World size 2 for full_shard / shard_grad_op / no_shard; 4 ranks as 2 "nodes" x 2 for hybrid_shard.
"""

from __future__ import annotations

import pytest

from bench.config.compose import flavors

pytestmark = pytest.mark.ranks

ARGS = flavors()["debug"]
BLOCKS = [f"layers.{i}" for i in range(ARGS.n_layers)]


def test_full_shard_every_parameter_is_a_dtensor_sharded_on_dim0_in_halves(ws2_reports):
    for rank in ws2_reports:
        params = rank["full_shard"]["params"]
        assert len(params) == 2 + 9 * ARGS.n_layers + 1  # embeddings, output, 9 per block, final norm
        for name, view in params.items():
            assert view["dtensor"] is True, name
            assert view["placements"] == ["S(0)"], name
            assert view["local_shape"][0] * 2 == view["shape"][0], name
            assert view["local_shape"][1:] == view["shape"][1:], name
        assert params["layers.0.feed_forward.w1.weight"]["local_shape"] == [ARGS.ffn_dim // 2, ARGS.dim]


def test_sharded_values_equal_an_unsharded_initialisation(ws2_reports):
    """materialize() fills shards so the full tensors do not depend on the world size."""
    for rank in ws2_reports:
        for strategy in ("full_shard", "shard_grad_op", "no_shard"):
            report = rank[strategy]
            assert report["full_values_match_unsharded_init"] == sorted(report["params"]), strategy


def test_full_shard_reshards_blocks_after_forward(ws2_reports):
    half_block = ARGS.block_params // 2
    for rank in ws2_reports:
        report = rank["full_shard"]
        for block in BLOCKS:
            for phase in ("before_forward", "after_forward", "after_backward"):
                assert report[phase][block] == {"state": "SHARDED", "all_dtensor": True, "local_numel": half_block}
        # The root never reshards after forward (backward needs it first), but does after backward.
        assert report["after_forward"]["root"]["state"] == "UNSHARDED"
        assert report["after_backward"]["root"]["state"] == "SHARDED"


def test_shard_grad_op_keeps_blocks_unsharded_between_forward_and_backward(ws2_reports):
    for rank in ws2_reports:
        report = rank["shard_grad_op"]
        for block in BLOCKS:
            assert report["before_forward"][block]["state"] == "SHARDED"
            # Between forward and backward the block holds whole, plain (non-DTensor) parameters.
            assert report["after_forward"][block] == {
                "state": "UNSHARDED",
                "all_dtensor": False,
                "local_numel": ARGS.block_params,
            }
            assert report["after_backward"][block]["state"] == "SHARDED"
            assert report["after_backward"][block]["local_numel"] == ARGS.block_params // 2
        assert report["after_forward"]["root"]["local_numel"] == ARGS.params


def test_no_shard_replicates_every_parameter(ws2_reports):
    for rank in ws2_reports:
        for name, view in rank["no_shard"]["params"].items():
            assert view["placements"] == ["R", "S(0)"], name  # (world, 1) mesh: the shard dim has one rank
            assert view["local_shape"] == view["shape"], name


def test_hybrid_shard_2x2_replicates_across_nodes_and_shards_within(ws4_reports):
    assert [r["hybrid"]["coordinate"] for r in ws4_reports] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    for rank in ws4_reports:
        report = rank["hybrid"]
        assert report["mesh_dim_names"] == ["replicate", "shard"]
        assert report["mesh"] == [[0, 1], [2, 3]]
        for name, view in report["params"].items():
            assert view["placements"] == ["R", "S(0)"], name
            assert view["local_shape"][0] * 2 == view["shape"][0], name


def test_hybrid_shard_replicas_hold_identical_shards_before_and_after_a_step(ws4_reports):
    digests = [(r["hybrid"]["digest_before"], r["hybrid"]["digest_after"]) for r in ws4_reports]
    for shard in (0, 1):
        # Ranks `shard` and `shard + 2` are the same shard on the two "nodes": bit-identical.
        assert digests[shard] == digests[shard + 2]
    before0, after0 = digests[0]
    before1, _ = digests[1]
    for name in before0:
        if not name.endswith("norm.weight"):  # norms start as ones: both halves are equal
            assert before0[name] != before1[name], f"{name}: the two shards within a node must differ"
        assert before0[name] != after0[name], f"{name}: one AdamW step must change every parameter"
