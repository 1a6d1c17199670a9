"""The planner's memory and communication closed forms on hand-checked small cases.

The `debug` flavor: dim 64, 2 layers, 4 heads (head_dim 16), 2 KV heads (kv_dim 32), ffn 172,
vocab 512. One block: wq 64*64 + wk 32*64 + wv 32*64 + wo 64*64 = 12,288; w1, w2, w3 3*64*172
= 33,024; two norms 128 -> 45,440. Root: embeddings 512*64 + norm 64 + output 512*64 = 65,600.
Total 2*45,440 + 65,600 = 156,480.
"""

from __future__ import annotations

import dataclasses

import pytest

from bench.analysis.planner.activations import block_bytes, held_bytes, recompute_bytes, root_bytes, saved_bytes
from bench.analysis.planner.comm import Link, comm_bytes_per_step, ring_time
from bench.analysis.planner.memory import moments, state_bytes, unsharded_bytes
from bench.analysis.planner.shapes import llama_shape, mpt_shape, padded_numel
from bench.analysis.planner.workload import Workload
from bench.config.compose import flavors, load_preset

FLAVORS = flavors()
DEBUG = llama_shape(FLAVORS["debug"])
P_TOTAL, P_BLOCK, P_ROOT = 156_480, 45_440, 65_600


def debug_workload(**kw) -> Workload:
    fields = {
        "shape": DEBUG,
        "cluster": load_preset("cluster", "local-cpu"),
        "nodes": 2,
        "gpus_per_node": 1,
        "strategy": "full_shard",
        "precision": "fp32",
        "seq_len": 64,
        "micro_batch": 1,
    }
    fields.update(kw)
    return Workload(**fields)


def test_debug_shape_counts_match_the_flavor():
    assert (DEBUG.params, DEBUG.block_params, DEBUG.root_params) == (P_TOTAL, P_BLOCK, P_ROOT)
    assert DEBUG.params == FLAVORS["debug"].params
    assert DEBUG.non_embedding_params == FLAVORS["debug"].non_embedding_params == P_TOTAL - 512 * 64


def test_mpt_7b_matches_llm_foundry_num_params():
    # llm-foundry's benchmark table: NumParams 6,658,859,008 for the 7b at seq 2048.
    assert mpt_shape("mpt-7b", 2048).params == 6_658_859_008
    # Tied embeddings: only the learned position table (2048 x 4096) is a lookup.
    assert mpt_shape("mpt-7b", 2048).non_embedding_params == 6_658_859_008 - 2048 * 4096


def test_padding_rounds_each_parameter_dim0_up_to_the_shard_count():
    # On 3 ranks: 64 -> 66 rows, 32 -> 33, 172 -> 174, 512 -> 513 (dim 1 unchanged).
    block = 66 * 64 + 33 * 64 + 33 * 64 + 66 * 64 + 174 * 64 + 66 * 172 + 174 * 64 + 66 + 66
    assert padded_numel(DEBUG.block_shapes, 3) == block == 46_428
    assert padded_numel(DEBUG.root_shapes, 3) == 513 * 64 + 66 + 513 * 64 == 65_730
    assert padded_numel(DEBUG.block_shapes, 2) == P_BLOCK  # every dim is even: no padding


@pytest.mark.parametrize(
    ("strategy", "precision", "expected"),
    [
        # all-gather: root once + each block twice (re-gathered in backward); reduce-scatter fp32.
        (
            "full_shard",
            "fp32",
            {"all_gather": 4 * (P_TOTAL + 2 * P_BLOCK), "reduce_scatter": 4 * P_TOTAL, "all_reduce": 0},
        ),
        (
            "full_shard",
            "bf16",
            {"all_gather": 2 * (P_TOTAL + 2 * P_BLOCK), "reduce_scatter": 4 * P_TOTAL, "all_reduce": 0},
        ),
        (
            "full_shard",
            "bf16_pure",
            {"all_gather": 2 * (P_TOTAL + 2 * P_BLOCK), "reduce_scatter": 2 * P_TOTAL, "all_reduce": 0},
        ),
        ("shard_grad_op", "fp32", {"all_gather": 625_920, "reduce_scatter": 625_920, "all_reduce": 0}),
        ("no_shard", "fp32", {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 625_920}),
        ("no_shard", "bf16", {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 625_920}),
    ],
)
def test_comm_bytes_world_2(strategy, precision, expected):
    assert comm_bytes_per_step(debug_workload(strategy=strategy, precision=precision)) == expected


def test_full_shard_fp32_world_2_is_the_prototype_count_plus_the_blocks_regather():
    counted = comm_bytes_per_step(debug_workload())
    assert counted["all_gather"] == 625_920 + 4 * 2 * P_BLOCK == 989_440


def test_hybrid_shards_within_the_node_and_all_reduces_the_shard_across_nodes():
    w = debug_workload(strategy="hybrid_shard", gpus_per_node=2)
    assert comm_bytes_per_step(w) == {"all_gather": 989_440, "reduce_scatter": 625_920, "all_reduce": 4 * P_TOTAL // 2}
    one_gpu_per_node = debug_workload(strategy="hybrid_shard", gpus_per_node=1)
    assert comm_bytes_per_step(one_gpu_per_node) == {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 4 * P_TOTAL}
    one_node = debug_workload(strategy="hybrid_shard", nodes=1, gpus_per_node=2)
    assert comm_bytes_per_step(one_node)["all_reduce"] == 0


def test_grad_accum_multiplies_and_one_rank_moves_nothing():
    assert comm_bytes_per_step(debug_workload(grad_accum=3))["reduce_scatter"] == 3 * 625_920
    assert comm_bytes_per_step(debug_workload(nodes=1)) == {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}


def test_padded_bytes_on_three_ranks():
    padded = 2 * 46_428 + 65_730
    counted = comm_bytes_per_step(debug_workload(nodes=3))
    assert counted == {"all_gather": 4 * (padded + 2 * 46_428), "reduce_scatter": 4 * padded, "all_reduce": 0}


def test_fp8_gathers_block_matrices_in_one_byte():
    w = debug_workload(
        precision="fp8", cluster=load_preset("cluster", "h100-8x"), gpus_per_node=4, nodes=1
    )  # no padding on 4
    # The attention matrices (multiples of 16) travel in fp8; the MLP's (ffn 172) and the norms stay bf16.
    attention, mlp, norms = 12_288, 33_024, 128
    per_block = attention * 1 + (mlp + norms) * 2
    assert comm_bytes_per_step(w)["all_gather"] == 2 * P_ROOT + 2 * 2 * per_block


def test_state_and_buffer_memory_full_shard_fp32_world_2():
    w = debug_workload()
    # Sharded fp32 master params and grads, AdamW's two fp32 moments: 78,240 params per rank.
    assert state_bytes(w) == {"params": 312_960, "grads": 312_960, "optimizer": 625_920}
    # Whole root (never resharded) + 2 whole blocks in flight; whole grads of the output
    # projection (the root is reduced last, the embedding's gradient comes at the end) + 2 blocks.
    assert unsharded_bytes(w) == {
        "unsharded_params": 4 * (P_ROOT + 2 * P_BLOCK),
        "unsharded_grads": 4 * (512 * 64 + 2 * P_BLOCK),
    }


def test_bf16_buffers_and_no_shard_states():
    w = debug_workload(precision="bf16")
    # bf16 gathered params; grads in bf16 plus their fp32 copy for the fp32 reduction.
    assert unsharded_bytes(w) == {
        "unsharded_params": 2 * (P_ROOT + 2 * P_BLOCK),
        "unsharded_grads": 2 * 512 * 64 + (2 + 4) * 2 * P_BLOCK,
    }
    assert state_bytes(debug_workload(strategy="no_shard"))["optimizer"] == 8 * P_TOTAL


def test_shard_grad_op_keeps_every_block_whole():
    deep = dataclasses.replace(
        debug_workload(),
        shape=llama_shape(FLAVORS["debug"].model_copy(update={"n_layers": 6})),
        strategy="shard_grad_op",
    )
    assert unsharded_bytes(deep)["unsharded_params"] == 4 * (P_ROOT + 6 * P_BLOCK)
    assert unsharded_bytes(dataclasses.replace(deep, strategy="full_shard"))["unsharded_params"] == 4 * (
        P_ROOT + 2 * P_BLOCK
    )


def test_activation_bytes_per_token_fp32_and_bf16():
    # Per token and block, fp32: two norms (fp32 input 256 + rsqrt 4 + normalised 256 + weighted
    # 256) + q, k, v, attention output (4 x (64 + 32 + 32 + 64)) + log-sum-exp (4 x 4 heads) + the
    # MLP's four 172-wide tensors (4 x 4 x 172).
    assert block_bytes(DEBUG, 4) == 2 * 772 + 768 + 16 + 2752 == 5080
    # bf16: the norms' fp32 input and rsqrt stay 4 bytes, everything else halves.
    assert block_bytes(DEBUG, 2) == 2 * (256 + 4 + 256) + 384 + 16 + 1376 == 2808
    # Root: ids and targets (int64), the final norm, the fp32 log-softmax over the vocabulary.
    assert root_bytes(DEBUG, 4) == 16 + 772 + 4 * 512
    # A checkpointed block keeps its input; selective_op also wq's, wv's, w1's and w2's outputs
    # (matmuls 1, 3, 5, 7), attention's output and log-sum-exp.
    assert held_bytes(debug_workload(activation_checkpointing="full")) == 256
    assert (
        held_bytes(debug_workload(activation_checkpointing="selective_op")) == 256 + 4 * (64 + 32 + 172 + 64) + 256 + 16
    )
    no_mm = debug_workload(activation_checkpointing="selective_op", ac_save_ops=("sdpa",))
    assert held_bytes(no_mm) == 256 + 256 + 16


def test_activation_memory_by_checkpointing_mode():
    tokens = 64

    def saved(mode, **kw):
        return saved_bytes(debug_workload(activation_checkpointing=mode, **kw))["activations"]

    assert saved("none") == tokens * 2 * 5080
    assert saved("full") == tokens * 2 * 256  # inputs kept
    assert saved("selective_op") == tokens * 2 * 1856
    assert saved("selective_layer") == tokens * (256 + 5080)  # block 0 checkpointed, block 1 not
    assert saved("selective_layer", ac_every=3) == tokens * (256 + 5080)
    # The block in backward rebuilds its set; selective_op's cached outputs are reused in it.
    assert recompute_bytes(debug_workload()) == 0
    assert recompute_bytes(debug_workload(activation_checkpointing="full")) == tokens * 5080
    assert recompute_bytes(debug_workload(activation_checkpointing="selective_op")) == tokens * (5080 - 1600)


def test_peak_moments_of_a_large_vocabulary_and_of_a_deep_model():
    # debug: the loss moment keeps two more fp32 vocab-wide gradients; no block is whole then.
    parts = moments(debug_workload())
    loss, backward, root_reduce = (parts[name] for name in ("loss", "backward", "root_reduce"))
    assert loss["logits"] == 64 * (root_bytes(DEBUG, 4) + 2 * 4 * 512)
    assert loss["unsharded_params"] == 4 * P_ROOT and loss["unsharded_grads"] == 0
    assert backward["unsharded_params"] == 4 * (P_ROOT + 2 * P_BLOCK) and backward["logits"] == 64 * 8
    # The root's reduce-scatter on CPU: gloo's copy of the fp32 input, the input and the half-size
    # output (debug's root needs no padding over 2 shards); nothing whole, nothing saved.
    assert root_reduce["unsharded_grads"] == 4 * P_ROOT * 5 // 2 == 656_000
    assert root_reduce["unsharded_params"] == root_reduce["activations"] == root_reduce["logits"] == 0
    assert parts.keys() == {"loss", "backward", "root_reduce"} and all(p.keys() == loss.keys() for p in parts.values())


def test_the_roots_reduce_scatter_is_tinys_peak_under_full_checkpointing():
    # tiny's root (2 x 8192 x 256 + 256 = 4,194,560 elements) outweighs its blocks: once backward is
    # over, the root's reduce-scatter holds more than the blocks' backward did. The grid measured
    # this point (docs/results/planner.md); 98,718,208 is every allocator-visible byte there.
    tiny = llama_shape(FLAVORS["tiny"])
    w = debug_workload(shape=tiny, nodes=1, gpus_per_node=2, micro_batch=2, activation_checkpointing="full")
    totals = {name: sum(part.values()) for name, part in moments(w).items()}
    assert totals == {"loss": 87_053_824, "backward": 96_666_624, "root_reduce": 98_718_208}
    assert tiny.root_params == 4_194_560
    # GPUs run no gloo copy: the copy-in (fp32 gradients and the fp32 input) is the larger part there.
    gpu = dataclasses.replace(w, cluster=load_preset("cluster", "h100-8x"))
    assert moments(gpu)["root_reduce"]["unsharded_grads"] == 2 * 4 * 4_194_560


def test_ring_time_closed_form():
    link = Link(bytes_per_s=1e9, hop_latency_s=1e-5)
    assert ring_time(1e9, 4, link) == pytest.approx(0.75 + 3e-5)
    assert ring_time(1e9, 4, link, passes=2) == pytest.approx(1.5 + 6e-5)
    assert ring_time(1e9, 1, link) == 0.0
    network = Link(bytes_per_s=1e9, hop_latency_s=1e-6, net_latency_s=1e-5, nodes=2, base_latency_s=1e-6)
    # 8 ranks on 2 nodes: 7 steps, one of them across the network.
    assert ring_time(8e9, 8, network) == pytest.approx(1e-6 + 7.0 + 6e-6 + 1e-5)


@pytest.mark.parametrize("layers", [1, 2, 3, 7])
@pytest.mark.parametrize("checkpointing", ["none", "full", "selective_layer", "selective_op"])
@pytest.mark.parametrize("strategy", ["full_shard", "shard_grad_op"])
def test_micro_step_sums_the_stages_in_their_order(layers, checkpointing, strategy):
    """The micro-step adds each stage of `stages` in order, bit for bit (it sums runs of equal
    stages: the same floats added in the same order), on both sides of resharding, with every
    checkpointing mode (selective_layer every second block), and on links slow enough that the
    stages expose communication."""
    from bench.analysis.planner.step import micro_step, stages

    shape = llama_shape(FLAVORS["debug"].model_copy(update={"n_layers": layers}))
    slow = {f"{kind}_gbps": 0.05 for kind in ("all_gather", "reduce_scatter", "all_reduce")}
    for links in ({}, slow):
        w = debug_workload(
            shape=shape, strategy=strategy, activation_checkpointing=checkpointing, ac_every=2, links=links
        )
        head, middle, tail = stages(w)
        micro = micro_step(w)
        assert len(middle) == 2 * layers + 2
        assert micro.compute == sum(c for c, _ in middle)
        assert micro.exposed == head + tail + sum(max(0.0, m - c) for c, m in middle)
        assert micro.overlapped == sum(min(m, c) for c, m in middle)
    if layers > 1:  # the slow links: stages expose what they cannot hide (one block has no stage
        assert micro.exposed > head + tail  # with communication without resharding)
