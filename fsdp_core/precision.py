"""The precision recipes (bench/schema/recipes.py) made real: FSDP2 mixed-precision policies, the
fp16 gradient scaler, fp8 conversion and the device checks.

fp8 converts only Linears whose dimensions are multiples of 16, never the output (fp8_module_filter).
The sharded master parameters and the optimizer state stay in fp32 in every recipe.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy

from bench.schema.recipes import FP8_EXCLUDED_FQNS, fp8_converts
from bench.schema.recipes import precision as recipe_of

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def mixed_precision_policy(precision: str, cast_forward_inputs: bool = True) -> MixedPrecisionPolicy:
    """FSDP2's policy for a precision name.

    cast_forward_inputs=False leaves a module's floating-point forward arguments as they come
    (FSDP2 otherwise casts every one of them to param_dtype before the module runs).
    """
    recipe = recipe_of(precision)
    if recipe.param_dtype == "float32" and recipe.reduce_dtype == "float32":
        param_dtype = reduce_dtype = None  # nothing to cast: FSDP2's default policy
    else:
        param_dtype, reduce_dtype = TORCH_DTYPES[recipe.param_dtype], TORCH_DTYPES[recipe.reduce_dtype]
    return MixedPrecisionPolicy(
        param_dtype=param_dtype, reduce_dtype=reduce_dtype, cast_forward_inputs=cast_forward_inputs
    )


def compute_dtype(precision: str) -> torch.dtype:
    return TORCH_DTYPES[recipe_of(precision).param_dtype]


def build_grad_scaler(precision: str, device_type: str):
    """A gradient scaler for fp16 (DTensor-aware, so it works on sharded gradients); None otherwise."""
    if not recipe_of(precision).grad_scaler:
        return None
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler(device=device_type)


def check_precision_supported(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run, before any work is done."""
    recipe = recipe_of(precision)
    if device.type not in recipe.device_types:
        raise RuntimeError(
            f"precision {precision} needs a {' or '.join(recipe.device_types)} device ({recipe.summary})"
        )
    if (
        device.type == "cuda"
        and recipe.min_capability
        and torch.cuda.get_device_capability(device) < recipe.min_capability
    ):
        needed = ".".join(map(str, recipe.min_capability))
        raise RuntimeError(f"precision {precision} needs a GPU of compute capability >= {needed} ({recipe.summary})")
    if recipe.param_dtype == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise RuntimeError(f"precision {precision} needs bf16 support on {torch.cuda.get_device_name(device)}")


def fp8_module_filter(module: nn.Module, fqn: str) -> bool:
    """Whether apply_fp8 converts this module (torchtitan's float8 module_filter_fn rules).

    Only nn.Linear, never the output projection, and only when in_features and out_features
    are both multiples of 16 (the `debug` flavor's ffn_dim=172 is not: its MLP stays bf16).
    Importable without torchao, so the choice is testable on any machine.
    """
    if not isinstance(module, nn.Linear) or fqn in FP8_EXCLUDED_FQNS:
        return False
    return fp8_converts(*module.weight.shape)


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
    if recipe_of(precision).fp8_linears:  # pragma: no cover - GPU images only
        from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

        precompute_float8_dynamic_scale_for_fsdp(model)
