"""The analytic FLOPs formula (bench/schema/flops.py) against torch's FlopCounterMode on `debug`.

What the formula counts, per trained token (forward + backward):
- 6·N, N = parameters minus the input embedding: each matmul weight does 2 FLOPs (a multiply-add)
  per token forward and 4 in backward (input gradient and weight gradient). The embedding is a
  lookup (no matmul); the output projection is a matmul and counts. N includes the RMSNorm
  weights (elementwise, not matmuls): on `debug` they are 320 of 123,712 parameters (0.26%).
- 12·L·d·s: attention's two matmuls (Q·Kᵀ and scores·V), 4·s·d per token and layer forward over
  the full s×s matrix (causal masking is not discounted), tripled for backward.
- Left out: softmax, RoPE, SiLU, norms' arithmetic, the loss: FlopCounterMode counts only
  matmul-like ops too, so the two agree to within the norm weights above.
HFU adds the recomputation of each checkpointed block under the mode (bench/schema/ac_modes.py):
full and selective_layer recompute a block's forward except the final down projection, which
torch's non-reentrant checkpoint never recomputes (early stop); selective_op recomputes the
matmuls its policy does not save (wk, wo, w3) and attention when its outputs are not saved.

FlopCounterMode has no formula for CPU's fused SDPA kernel, so the model-FLOPs counts run under
the math SDPA backend, whose matmuls (bmm) it does count; the math backend has no attention op
for selective_op to save, so there attention is recomputed too. On the fused kernel (what the
engine runs), the kernel's FLOPs are counted with torch's own SDPA formulas, and selective_op's
extra FLOPs over no checkpointing are exactly its recomputed matmuls.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from bench.config.compose import flavors
from bench.schema.flops import checkpointed_blocks, flops_per_token, hardware_flops_per_token, recompute_flops_per_token
from fsdp_core.model import build_model
from fsdp_core.parallelize import apply_activation_checkpointing

FLAVORS = flavors()

ARGS = FLAVORS["debug"]
BATCH, SEQ = 2, 64
TOLERANCE = 0.02  # the formula must match the counter within 2%


# The fused CPU attention kernel the engine runs, counted with torch's SDPA formulas (forward:
# two matmuls over the full s x s matrix; backward: the scores recomputed, then four matmuls).
FUSED_CPU_SDPA = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: (
        lambda q, k, v, *args, out_shape=None, **kwargs: sdpa_flop_count(q, k, v)
    ),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        lambda grad, q, k, v, *args, out_shape=None, **kwargs: sdpa_backward_flop_count(grad, q, k, v)
    ),
}


def counted_flops_per_token(mode: str, early_stop: bool = True, fused: bool = False, every: int = 2) -> float:
    """FLOPs FlopCounterMode sees in one forward + backward of `debug`, per token."""
    torch.manual_seed(0)
    model = build_model(ARGS, "cpu")
    model.init_weights(seed=0)
    apply_activation_checkpointing(model, mode, every)
    tokens = torch.randint(0, ARGS.vocab_size, (BATCH, SEQ + 1))
    counter = FlopCounterMode(display=False, custom_mapping=FUSED_CPU_SDPA)
    backend = nullcontext() if fused else sdpa_kernel(SDPBackend.MATH)
    with checkpoint.set_checkpoint_early_stop(early_stop), backend, counter:
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten()).backward()
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


@pytest.mark.parametrize(("mode", "every"), [("full", 2), ("selective_layer", 2), ("selective_layer", 3)])
def test_hardware_flops_match_flop_counter_with_activation_checkpointing(mode, every):
    counted = counted_flops_per_token(mode, every=every)
    assert counted == pytest.approx(hardware_flops_per_token(ARGS, SEQ, mode, every), rel=TOLERANCE)
    assert counted > flops_per_token(ARGS, SEQ)


def test_selective_op_recomputes_its_unsaved_matmuls_and_keeps_attention():
    """On the fused kernel, selective_op adds exactly wk, wo and w3 per block; on the math backend
    (no attention op to save) attention's matmuls are recomputed too."""
    extra = counted_flops_per_token("selective_op", fused=True) - counted_flops_per_token("none", fused=True)
    d, kv, f = ARGS.dim, ARGS.n_kv_heads * ARGS.head_dim, ARGS.ffn_dim
    assert extra == ARGS.n_layers * 2 * (d * kv + d * d + d * f)
    assert extra == hardware_flops_per_token(ARGS, SEQ, "selective_op") - flops_per_token(ARGS, SEQ)
    math_backend = hardware_flops_per_token(ARGS, SEQ, "selective_op", ac_save_ops=("mm", "collectives", "max"))
    assert counted_flops_per_token("selective_op") == pytest.approx(math_backend, rel=TOLERANCE)


def test_recompute_skips_the_down_projection_because_of_checkpoint_early_stop():
    """Without early stop the whole block forward is recomputed: exactly one w2 matmul per block more."""
    blocks = checkpointed_blocks(ARGS, "full")
    extra = counted_flops_per_token("full", early_stop=False) - counted_flops_per_token("full")
    assert extra == blocks * 2 * ARGS.dim * ARGS.ffn_dim


def test_block_matmuls_are_listed_in_the_order_the_forward_runs_them():
    """selective_op saves matmul outputs by position: ModelSpec.block_matmuls must be the real order."""
    seen = []

    class Matmuls(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func == torch.ops.aten.mm.default:
                seen.append((args[1].shape[1], args[0].shape[1]))  # (out_features, in_features)
            return func(*args, **(kwargs or {}))

    block = build_model(ARGS, "cpu").layers["0"]
    rope = torch.zeros(SEQ, ARGS.head_dim // 2, 2)
    with Matmuls():
        block(torch.randn(1, SEQ, ARGS.dim), rope)
    assert tuple(seen) == ARGS.block_matmuls


@pytest.mark.parametrize(
    ("mode", "every", "expected"),
    [("none", 2, 0), ("full", 2, 4), ("selective_op", 2, 4), ("selective_layer", 2, 2), ("selective_layer", 3, 2)],
)
def test_checkpointed_blocks_match_what_parallelize_wraps(mode, every, expected):
    model = build_model(FLAVORS["tiny"])  # 4 layers, meta device
    apply_activation_checkpointing(model, mode, every)
    wrapped = [name for name, block in model.layers.items() if isinstance(block, CheckpointWrapper)]
    assert len(wrapped) == checkpointed_blocks(FLAVORS["tiny"], mode, every) == expected
    if mode == "selective_layer":
        assert wrapped == [str(i) for i in range(0, 4, every)]


def test_hardware_flops_add_recompute_per_checkpointed_block():
    args = FLAVORS["llama2-7b"]
    model = flops_per_token(args, 4096)
    assert hardware_flops_per_token(args, 4096, "none") == model
    assert hardware_flops_per_token(args, 4096, "full") == model + 32 * recompute_flops_per_token(args, 4096)
    assert hardware_flops_per_token(args, 4096, "selective_layer") == model + 16 * recompute_flops_per_token(args, 4096)
    # One block's recompute: its forward (2·N_block + 4·d·s) less the down projection (2·d·ffn_dim).
    assert recompute_flops_per_token(args, 4096) == 2 * (args.block_params - 4096 * 11008) + 4 * 4096 * 4096
    # selective_op: wk, wo, w3 in every block (llama2-7b has no GQA: kv = d).
    op = recompute_flops_per_token(args, 4096, "selective_op")
    assert op == 2 * (4096 * 4096 + 4096 * 4096 + 4096 * 11008)
    assert hardware_flops_per_token(args, 4096, "selective_op") == model + 32 * op
