"""Flavor registry: parameter counts on the meta device against the published sizes and ModelArgs' closed form."""

from __future__ import annotations

import dataclasses

import pytest

from bench.schemas import ModelInfo
from fsdp_core.flavors import FLAVORS, ModelArgs, get_flavor
from fsdp_core.model import build_model, count_parameters

# Published totals: Meta's Llama-2 paper/model cards, the TinyLlama config, torchtitan's Llama-3 8B.
PUBLISHED = {
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "tinyllama-1.1b": 1_100_048_384,
    "llama3-8b": 8_030_261_248,
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_published_parameter_counts_exactly_on_the_meta_device(name):
    model = build_model(FLAVORS[name])  # meta: a 70B model costs no memory
    assert all(p.is_meta for p in model.parameters())
    assert count_parameters(model) == PUBLISHED[name]


@pytest.mark.parametrize("name", list(FLAVORS))
def test_every_flavor_meta_count_equals_the_closed_form(name):
    args = FLAVORS[name]
    model = build_model(args)
    assert count_parameters(model) == args.params
    blocks = model.layers.values()
    assert {sum(p.numel() for p in block.parameters()) for block in blocks} == {args.block_params}
    assert args.non_embedding_params == args.params - args.vocab_size * args.dim
    assert args.name == name and args.source
    assert args.default_seq_len <= args.max_seq_len


@pytest.mark.parametrize("name", list(FLAVORS))
def test_model_info_matches_the_record_schema(name):
    info = FLAVORS[name].info()
    assert ModelInfo(**info).params == FLAVORS[name].params
    assert set(info) == set(ModelInfo.model_fields)


def test_cpu_flavor_sizes():
    assert FLAVORS["debug"].params == 156_480
    assert 5e6 <= FLAVORS["tiny"].params <= 20e6  # issue 2: "about 5-20 M parameters"
    assert FLAVORS["tiny"].default_seq_len == 256


def test_overrides_replace_fields_and_recompute_derived_ones():
    args = FLAVORS["llama2-7b"].with_overrides(n_layers=2, n_heads=16, n_kv_heads=16)
    assert (args.n_layers, args.head_dim) == (2, 256)
    assert args.params == 2 * 32000 * 4096 + 2 * FLAVORS["llama2-7b"].block_params + 4096
    assert count_parameters(build_model(args)) == args.params


def test_bad_overrides_name_the_field():
    with pytest.raises(ValueError, match=r"unknown model field\(s\) \['layers'\]; allowed: \["):
        FLAVORS["debug"].with_overrides(layers=2)
    with pytest.raises(ValueError, match="model.dim=100 must be divisible by model.n_heads=3"):
        FLAVORS["debug"].with_overrides(dim=100, n_heads=3)
    with pytest.raises(ValueError, match="model.n_heads=4 must be divisible by model.n_kv_heads=3"):
        FLAVORS["debug"].with_overrides(n_kv_heads=3)


def test_get_flavor_lists_the_known_names():
    assert get_flavor("tiny") is FLAVORS["tiny"]
    with pytest.raises(ValueError, match="unknown model 'gpt5'; allowed: debug, tiny, "):
        get_flavor("gpt5")


def test_flavors_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        FLAVORS["debug"].dim = 1  # type: ignore[misc]
    assert isinstance(FLAVORS["debug"], ModelArgs)
