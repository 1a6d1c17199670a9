"""The analytic FLOPs formula (fsdp_core/flops.py) against torch's FlopCounterMode on `debug`.

What the formula counts, per trained token (forward + backward):
- 6·N, N = parameters minus the input embedding: each matmul weight does 2 FLOPs (a multiply-add)
  per token forward and 4 in backward (input gradient and weight gradient). The embedding is a
  lookup (no matmul); the output projection is a matmul and counts. N includes the RMSNorm
  weights (elementwise, not matmuls): on `debug` they are 320 of 123,712 parameters (0.26%).
- 12·L·d·s: attention's two matmuls (Q·Kᵀ and scores·V), 4·s·d per token and layer forward over
  the full s×s matrix (causal masking is not discounted), tripled for backward.
- Left out: softmax, RoPE, SiLU, norms' arithmetic, the loss: FlopCounterMode counts only
  matmul-like ops too, so the two agree to within the norm weights above.
HFU adds the recomputation of each checkpointed block: its forward except the final down
projection, which torch's non-reentrant checkpoint never recomputes (early stop).

FlopCounterMode cannot see CPU's fused SDPA kernel, so the count runs under the math SDPA
backend, whose matmuls (bmm) it does count.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from bench.config import flavors
from fsdp_core.flops import checkpointed_blocks, flops_per_token, hardware_flops_per_token, recompute_flops_per_token
from fsdp_core.model import build_model
from fsdp_core.parallelize import apply_activation_checkpointing

FLAVORS = flavors()

ARGS = FLAVORS["debug"]
BATCH, SEQ = 2, 64
TOLERANCE = 0.02  # the formula must match the counter within 2%


def counted_flops_per_token(activation_checkpointing: str, early_stop: bool = True) -> float:
    """FLOPs FlopCounterMode sees in one forward + backward of `debug`, per token."""
    torch.manual_seed(0)
    model = build_model(ARGS, "cpu")
    model.init_weights(seed=0)
    apply_activation_checkpointing(model, activation_checkpointing)
    tokens = torch.randint(0, ARGS.vocab_size, (BATCH, SEQ + 1))
    counter = FlopCounterMode(display=False)
    with checkpoint.set_checkpoint_early_stop(early_stop), sdpa_kernel(SDPBackend.MATH), counter:
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
    return counter.get_total_flops() / (BATCH * SEQ)


def test_closed_form_on_llama2_7b():
    non_embedding = 6_738_415_616 - 32_000 * 4096
    assert flops_per_token(FLAVORS["llama2-7b"], 4096) == 6 * non_embedding + 12 * 32 * 4096 * 4096
    assert flops_per_token(FLAVORS["llama2-7b"], 4096) == 46_086_512_640


def test_model_flops_match_flop_counter_within_2_percent():
    counted = counted_flops_per_token("none")
    formula = flops_per_token(ARGS, SEQ)
    assert counted == pytest.approx(formula, rel=TOLERANCE)
    # The whole difference is the norm weights, which the formula counts as if they were matmuls.
    norm_weights = (2 * ARGS.n_layers + 1) * ARGS.dim
    assert formula - counted == 6 * norm_weights


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_hardware_flops_match_flop_counter_with_activation_checkpointing(mode):
    counted = counted_flops_per_token(mode)
    assert counted == pytest.approx(hardware_flops_per_token(ARGS, SEQ, mode), rel=TOLERANCE)
    assert counted > flops_per_token(ARGS, SEQ)


def test_recompute_skips_the_down_projection_because_of_checkpoint_early_stop():
    """Without early stop the whole block forward is recomputed: exactly one w2 matmul per block more."""
    blocks = checkpointed_blocks(ARGS, "full")
    extra = counted_flops_per_token("full", early_stop=False) - counted_flops_per_token("full")
    assert extra == blocks * 2 * ARGS.dim * ARGS.ffn_dim


def test_checkpointed_blocks_match_what_parallelize_wraps():
    for mode in ("none", "full", "selective"):
        model = build_model(FLAVORS["tiny"])  # 4 layers, meta device
        apply_activation_checkpointing(model, mode)
        wrapped = sum(isinstance(block, CheckpointWrapper) for block in model.layers.values())
        assert wrapped == checkpointed_blocks(FLAVORS["tiny"], mode) == {"none": 0, "full": 4, "selective": 2}[mode]


def test_hardware_flops_add_recompute_per_checkpointed_block():
    args = FLAVORS["llama2-7b"]
    model = flops_per_token(args, 4096)
    assert hardware_flops_per_token(args, 4096, "none") == model
    assert hardware_flops_per_token(args, 4096, "full") == model + 32 * recompute_flops_per_token(args, 4096)
    assert hardware_flops_per_token(args, 4096, "selective") == model + 16 * recompute_flops_per_token(args, 4096)
    # One block's recompute: its forward (2·N_block + 4·d·s) less the down projection (2·d·ffn_dim).
    assert recompute_flops_per_token(args, 4096) == 2 * (args.block_params - 4096 * 11008) + 4 * 4096 * 4096
