"""bench/analysis/memory_categories.py: the tracker's categories paired with the planner's components."""

from __future__ import annotations

from bench.analysis.memory_categories import PAIRS, compare

# `debug`, 2 ranks, full_shard, fp32, sequence 64, micro-batch 2, no checkpointing: the tracker's
# categories and the planner's breakdown as measured and predicted on 2026-12-07.
TRACKED = {
    "Sharded Param": 312_960, "Unsharded Param": 262_400, "Buffer": 32_768, "Sharded Grad": 0,
    "Unsharded Grad": 0, "Activation": 1_663_500, "Temp": 524_288, "All Gather": 0, "Reduce Scatter": 0,
    "OptState": 626_004, "Inputs": 0, "Total": 3_421_920,
}  # fmt: skip
PREDICTED = {
    "memory_bytes_per_device": {
        "params": 312_960, "grads": 312_960, "optimizer": 625_920, "unsharded_params": 262_400,
        "unsharded_grads": 0, "activations": 1_300_480, "logits": 887_296, "headroom": 375_932_146,
        "total": 379_634_162, "host_offloaded": 0,
    },
    "peak_memory_bytes": {"moment": "loss", "allocated": 3_702_016},
}  # fmt: skip


def test_every_pair_sums_its_sides():
    rows = {r.pair: (r.measured, r.predicted, r.difference) for r in compare(TRACKED, PREDICTED)}
    assert rows == {
        "Sharded Param / params": (312_960, 312_960, 0),
        "Unsharded Param + All Gather / unsharded_params": (262_400, 262_400, 0),
        "OptState / optimizer": (626_004, 625_920, 84),
        "Sharded Grad / grads": (0, 312_960, -312_960),
        "Unsharded Grad + Reduce Scatter / unsharded_grads": (0, 0, 0),
        "Activation + Temp / activations + logits": (2_187_788, 2_187_776, 12),
        "Buffer / -": (32_768, None, 32_768),
        "Total / allocated": (3_421_920, 3_702_016, -280_096),
    }


def test_reasons_follow_the_moment_and_the_sign():
    at_loss = {r.pair: r.reason for r in compare(TRACKED, PREDICTED)}
    assert at_loss["Sharded Param / params"] is None  # equal: nothing to explain
    assert at_loss["Activation + Temp / activations + logits"] is None  # +12 bytes: no known reason
    assert "zero_grad(set_to_none=True)" in at_loss["Sharded Grad / grads"]
    assert "step counters" in at_loss["OptState / optimizer"]
    assert "RoPE" in at_loss["Buffer / -"]
    # The same gap at the blocks' backward has the backward moment's reason; a total above the
    # planner's has none (the planner is meant to stay above).
    backward = {**PREDICTED, "peak_memory_bytes": {"moment": "backward", "allocated": 3_702_016}}
    assert "already reduce-scattered" in {r.pair: r.reason for r in compare(TRACKED, backward)}["Sharded Grad / grads"]
    over = {r.pair: r.reason for r in compare({**TRACKED, "Total": 4_000_000}, backward)}
    assert over["Total / allocated"] is None


def test_each_category_is_paired_at_most_once_inputs_only_in_the_total():
    tracked = [name for pair in PAIRS for name in pair.tracked]
    assert sorted(tracked) == sorted(set(tracked))
    assert set(TRACKED) - set(tracked) == {"Inputs"}


# `tiny`, 2 ranks, full_shard, fp32, sequence 64, micro-batch 2, full checkpointing: the tracker's peak
# at the root's reduce-scatter (2026-12-07) and the planner's `root_reduce` moment, its peak there.
TINY_TRACKED = {
    "Sharded Param": 14_193_152, "Unsharded Param": 0, "Buffer": 262_144, "Sharded Grad": 5_804_032,
    "Unsharded Grad": 8_388_608, "Activation": 2_060, "Temp": 25_167_360, "All Gather": 0,
    "Reduce Scatter": 16_778_240, "OptState": 28_386_460, "Inputs": 0, "Total": 98_982_056,
}  # fmt: skip
TINY_ROOT_REDUCE = {
    "memory_bytes_per_device": {
        "params": 14_193_152, "grads": 14_193_152, "optimizer": 28_386_304, "unsharded_params": 0,
        "unsharded_grads": 41_945_600, "activations": 0, "logits": 0,
    },
    "peak_memory_bytes": {"moment": "root_reduce", "allocated": 98_718_208},
}  # fmt: skip


def test_the_roots_reduce_scatter_accounts_for_every_byte():
    rows = {r.pair: (r.difference, r.reason) for r in compare(TINY_TRACKED, TINY_ROOT_REDUCE)}
    # The collective's buffers: the tracker files the output (8,389,120) and gloo's copy of the input
    # (16,778,240) under Temp, the planner under unsharded_grads; the tracker's Unsharded Grad is the
    # output projection's gradient (8,388,608) its own wrapper holds.
    assert rows["Unsharded Grad + Reduce Scatter / unsharded_grads"][0] == 8_388_608 - 8_389_120 - 16_778_240
    assert rows["Activation + Temp / activations + logits"][0] == 8_389_120 + 16_778_240 + 2_060
    assert rows["Sharded Grad / grads"][0] == -8_389_120  # the root's half, not reduced yet
    # Total: buffer + step counters + activation + the held gradient - the root's sharded grads.
    assert rows["Total / allocated"][0] == 262_144 + 156 + 2_060 + 8_388_608 - 8_389_120 == 263_848
    assert all(reason for difference, reason in rows.values() if difference)
