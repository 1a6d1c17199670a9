"""Counted communication bytes per step against the closed form, on `debug`.

Convention (fsdp_core/comm_counter.py), per rank and step: an all-gather counts its output (the
unsharded bytes), a reduce-scatter its input, an all-reduce its tensor; collectives on a group of
one rank are not counted. With P the flavor's parameters, P_blocks those of its transformer blocks
and b the bytes of the all-gather dtype:
- full_shard: all-gather (P + P_blocks)·b (forward gathers everything; blocks re-gather in
  backward because they resharded after forward; the root does not), reduce-scatter P·4 (fp32).
- shard_grad_op: all-gather P·b (no re-gather), reduce-scatter P·4.
- no_shard and hybrid on (2 nodes x 1): the shard group has one rank, so only the gradient
  all-reduce across replicas moves bytes: P·4.
- hybrid_shard on 2x2: the full_shard volumes within a node plus an all-reduce of the half-size
  gradient shard across nodes: P·4/2.
Every `debug` dimension divides by 4, so there is no padding (checked below).
"""

from __future__ import annotations

import pytest

from bench.config.compose import flavors

pytestmark = pytest.mark.ranks

ARGS = flavors()["debug"]
P = ARGS.params
P_BLOCKS = ARGS.n_layers * ARGS.block_params
FP32, BF16 = 4, 2


def comm(all_gather: int = 0, reduce_scatter: int = 0, all_reduce: int = 0) -> dict[str, int]:
    return {"all_gather": all_gather, "reduce_scatter": reduce_scatter, "all_reduce": all_reduce}


CLOSED_FORM = {
    "full_shard/ws2": comm((P + P_BLOCKS) * FP32, P * FP32),
    "shard_grad_op/ws2": comm(P * FP32, P * FP32),
    "no_shard/ws2": comm(all_reduce=P * FP32),
    "hybrid_shard/ws2": comm(all_reduce=P * FP32),
    "hybrid_shard_zero2/ws2": comm(all_reduce=P * FP32),
    # grad_accum=2: every micro-step gathers and reduces again (gradient sync is never skipped).
    "full_shard/ws2/ga2": comm(2 * (P + P_BLOCKS) * FP32, 2 * P * FP32),
    "full_shard/ws2/bf16": comm((P + P_BLOCKS) * BF16, P * FP32),
    "full_shard/ws2/bf16_pure": comm((P + P_BLOCKS) * BF16, P * BF16),
    # World size 1: every group has one rank, nothing moves.
    "full_shard/ws1": comm(),
    "no_shard/ws1": comm(),
}


def test_debug_shards_evenly_on_4_ranks():
    from fsdp_core.model import build_model  # torch: here, not at collection

    shapes = [p.shape for p in build_model(ARGS).parameters()]
    assert sum(s.numel() for s in shapes) == P == 156_480
    assert all(s[0] % 4 == 0 for s in shapes)


@pytest.mark.parametrize("label", list(CLOSED_FORM))
def test_counted_bytes_equal_the_closed_form(engine_records, label):
    record = engine_records[label]
    assert record.status == "ok", record.error
    assert record.metrics.comm_bytes_per_step.model_dump() == CLOSED_FORM[label]


def test_hybrid_shard_2x2_bytes(ws4_reports):
    expected = comm((P + P_BLOCKS) * FP32, P * FP32, P * FP32 // 2)
    assert [r["hybrid"]["comm_bytes"] for r in ws4_reports] == [expected] * 4
