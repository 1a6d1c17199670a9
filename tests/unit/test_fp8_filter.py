"""Which Linears precision fp8 converts, on every flavor (meta device: no memory, no torchao needed).

torchao's float8 matmul (torch._scaled_mm) needs both dimensions of a Linear divisible by 16;
the vocab-sized output projection stays bf16 on purpose. fsdp_core.precision.fp8_module_filter
encodes both rules, as torchtitan's float8 converter does.
"""

from __future__ import annotations

import sys
import types

import pytest
from torch import nn

from bench.config.compose import flavors
from fsdp_core.model import build_model
from fsdp_core.precision import apply_fp8, fp8_module_filter

FLAVORS = flavors()

BLOCK_LINEARS = (
    "attention.wq",
    "attention.wk",
    "attention.wv",
    "attention.wo",
    "feed_forward.w1",
    "feed_forward.w2",
    "feed_forward.w3",
)
# flavor -> the block Linears left in bf16 because a dimension is not a multiple of 16.
# debug: wq/wo 64x64, wk/wv 64->32 (2 KV heads x 16) divide; ffn_dim 172 = 4 x 43 does not.
# Every other flavor's dim, KV width and ffn_dim divide by 16 (tiny: 688 = 16 x 43).
EXCLUDED_BLOCK_LINEARS = {
    "debug": {"feed_forward.w1", "feed_forward.w2", "feed_forward.w3"},
    "tiny": set(),
    "tinyllama-1.1b": set(),
    "llama2-7b": set(),
    "llama2-13b": set(),
    "llama2-70b": set(),
    "llama3-8b": set(),
}


def converted(model: nn.Module, module_filter) -> set[str]:
    """FQNs of the Linears a filter lets through (torchao's swap only asks about nn.Linear modules)."""
    return {fqn for fqn, mod in model.named_modules() if isinstance(mod, nn.Linear) and module_filter(mod, fqn)}


def expected_converted(name: str) -> set[str]:
    keep = [linear for linear in BLOCK_LINEARS if linear not in EXCLUDED_BLOCK_LINEARS[name]]
    return {f"layers.{i}.{linear}" for i in range(FLAVORS[name].n_layers) for linear in keep}


def test_every_flavor_has_an_expectation():
    assert set(EXCLUDED_BLOCK_LINEARS) == set(FLAVORS)


@pytest.mark.parametrize("name", list(FLAVORS))
def test_fp8_filter_converts_exactly_the_aligned_block_linears(name):
    model = build_model(FLAVORS[name])  # meta: even 70B costs nothing
    linears = {fqn for fqn, mod in model.named_modules() if isinstance(mod, nn.Linear)}
    assert len(linears) == 7 * FLAVORS[name].n_layers + 1  # the block linears and the output
    assert converted(model, fp8_module_filter) == expected_converted(name)


def test_fp8_filter_reasons():
    debug = build_model(FLAVORS["debug"])
    block = debug.layers["0"]
    assert tuple(block.attention.wk.weight.shape) == (32, 64)  # 2 KV heads x head_dim 16
    assert fp8_module_filter(block.attention.wk, "layers.0.attention.wk") is True
    assert tuple(block.feed_forward.w1.weight.shape) == (172, 64)
    assert fp8_module_filter(block.feed_forward.w1, "layers.0.feed_forward.w1") is False  # out 172
    assert fp8_module_filter(block.feed_forward.w2, "layers.0.feed_forward.w2") is False  # in 172
    # The output projection stays bf16 whatever its shape (8192 x 256 on tiny divides by 16).
    tiny = build_model(FLAVORS["tiny"])
    assert tiny.output.weight.shape[0] % 16 == tiny.output.weight.shape[1] % 16 == 0
    assert fp8_module_filter(tiny.output, "output") is False
    # Only Linears: a norm or an embedding is never handed to torchao.
    assert fp8_module_filter(block.attention_norm, "layers.0.attention_norm") is False
    assert fp8_module_filter(debug.tok_embeddings, "tok_embeddings") is False


def test_apply_fp8_uses_the_filter(monkeypatch):
    """apply_fp8 hands torchao fp8_module_filter (a stand-in torchao.float8 records the call)."""
    calls = []
    float8 = types.ModuleType("torchao.float8")
    float8.Float8LinearConfig = lambda **kwargs: kwargs
    float8.convert_to_float8_training = lambda model, config, module_filter_fn: calls.append(
        (model, config, module_filter_fn)
    )
    torchao = types.ModuleType("torchao")
    torchao.float8 = float8
    monkeypatch.setitem(sys.modules, "torchao", torchao)
    monkeypatch.setitem(sys.modules, "torchao.float8", float8)

    model = build_model(FLAVORS["debug"])
    apply_fp8(model)
    assert len(calls) == 1
    passed_model, config, module_filter = calls[0]
    assert passed_model is model
    assert config == {"enable_fsdp_float8_all_gather": True}
    assert converted(model, module_filter) == expected_converted("debug")
