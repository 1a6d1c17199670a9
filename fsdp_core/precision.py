"""Precision recipes: FSDP2 mixed-precision policies, the fp16 gradient scaler, fp8 conversion.

| precision | parameters all-gathered and computed in | gradients reduced in |
|-----------|-----------------------------------------|----------------------|
| fp32      | fp32                                    | fp32                 |
| bf16      | bf16                                    | fp32                 |
| bf16_pure | bf16                                    | bf16 (llama-recipes' pure_bf16) |
| fp16      | fp16 (+ sharded gradient scaler)        | fp32                 |
| fp8       | fp8 linears via torchao, bf16 elsewhere | fp32                 |
fp8 converts only Linears whose dimensions are multiples of 16, never the output (fp8_module_filter).
The sharded master parameters and the optimizer state stay in fp32 in every recipe.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy

_POLICIES = {
    "fp32": (None, None),
    "bf16": (torch.bfloat16, torch.float32),
    "bf16_pure": (torch.bfloat16, torch.bfloat16),
    "fp16": (torch.float16, torch.float32),
    "fp8": (torch.bfloat16, torch.float32),
}


def mixed_precision_policy(precision: str, cast_forward_inputs: bool = True) -> MixedPrecisionPolicy:
    """FSDP2's policy for a precision name.

    cast_forward_inputs=False leaves a module's floating-point forward arguments as they come
    (FSDP2 otherwise casts every one of them to param_dtype before the module runs).
    """
    param_dtype, reduce_dtype = _POLICIES[precision]
    return MixedPrecisionPolicy(
        param_dtype=param_dtype, reduce_dtype=reduce_dtype, cast_forward_inputs=cast_forward_inputs
    )


def compute_dtype(precision: str) -> torch.dtype:
    return _POLICIES[precision][0] or torch.float32


def build_grad_scaler(precision: str, device_type: str):
    """A gradient scaler for fp16 (DTensor-aware, so it works on sharded gradients); None otherwise."""
    if precision != "fp16":
        return None
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler(device=device_type)


def check_precision_supported(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run, before any work is done."""
    if precision == "fp8":
        if device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 9):
            raise RuntimeError("precision fp8 needs a GPU with FP8 tensor cores (compute capability >= 8.9)")
    if precision in ("bf16", "bf16_pure", "fp8") and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise RuntimeError(f"precision {precision} needs bf16 support on {torch.cuda.get_device_name(device)}")


# torch._scaled_mm (the fp8 matmul behind torchao's Float8Linear) needs both dimensions of the
# weight to be multiples of 16; an unaligned Linear fails at its first matmul on the GPU.
FP8_ALIGNMENT = 16
# The output projection stays in bf16: its vocab-sized matmul feeds the loss directly and is
# sensitive to fp8 error (torchtitan's default filter_fqns = ["output"] does the same).
FP8_EXCLUDED_FQNS = ("output",)


def fp8_module_filter(module: nn.Module, fqn: str) -> bool:
    """Whether apply_fp8 converts this module (torchtitan's float8 module_filter_fn rules).

    Only nn.Linear, never the output projection, and only when in_features and out_features
    are both multiples of 16 (the `debug` flavor's ffn_dim=172 is not: its MLP stays bf16).
    Importable without torchao, so the choice is testable on any machine.
    """
    if not isinstance(module, nn.Linear) or fqn in FP8_EXCLUDED_FQNS:
        return False
    out_features, in_features = module.weight.shape
    return out_features % FP8_ALIGNMENT == 0 and in_features % FP8_ALIGNMENT == 0


def apply_fp8(model: nn.Module) -> None:
    """Swap the blocks' aligned linears for torchao Float8Linear (tensorwise scaling, fp8 all-gather).

    fp8_module_filter decides which: not the output projection, not a Linear with a dimension
    that is not a multiple of 16. Call it before activation checkpointing and compile wrap the
    blocks (parallelize_llama does), so the FQNs are the model's own.
    """
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as exc:  # pragma: no cover - GPU images only
        raise RuntimeError("precision fp8 needs torchao: pip install 'fsdp-bench[fp8]'") from exc
    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)
    convert_to_float8_training(model, config=config, module_filter_fn=fp8_module_filter)


def after_optimizer_step(model: nn.Module, precision: str) -> None:
    """fp8 with fp8 all-gather: precompute the next step's scales in one all-reduce (torchao's advice)."""
    if precision == "fp8":  # pragma: no cover - GPU images only
        from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

        precompute_float8_dynamic_scale_for_fsdp(model)
