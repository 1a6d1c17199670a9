"""Precision recipes: FSDP2 mixed-precision policies, the fp16 gradient scaler, fp8 conversion.

| precision | parameters all-gathered and computed in | gradients reduced in |
|-----------|-----------------------------------------|----------------------|
| fp32      | fp32                                    | fp32                 |
| bf16      | bf16                                    | fp32                 |
| bf16_pure | bf16                                    | bf16 (llama-recipes' pure_bf16) |
| fp16      | fp16 (+ sharded gradient scaler)        | fp32                 |
| fp8       | fp8 linears via torchao, bf16 elsewhere | fp32                 |
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


def mixed_precision_policy(precision: str) -> MixedPrecisionPolicy:
    """FSDP2's policy for a precision name."""
    param_dtype, reduce_dtype = _POLICIES[precision]
    return MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)


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


def apply_fp8(model: nn.Module) -> None:
    """Swap the blocks' linears for torchao Float8Linear (tensorwise scaling, fp8 all-gather).

    The output projection stays in bf16: its vocab-sized matmul is sensitive to fp8 error
    (torchtitan's default filter does the same).
    """
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as exc:  # pragma: no cover - GPU images only
        raise RuntimeError("precision fp8 needs torchao: pip install 'fsdp-bench[fp8]'") from exc
    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)
    convert_to_float8_training(model, config=config, module_filter_fn=lambda mod, fqn: fqn != "output")


def after_optimizer_step(model: nn.Module, precision: str) -> None:
    """fp8 with fp8 all-gather: precompute the next step's scales in one all-reduce (torchao's advice)."""
    if precision == "fp8":  # pragma: no cover - GPU images only
        from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

        precompute_float8_dynamic_scale_for_fsdp(model)
