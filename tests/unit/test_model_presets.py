"""Model presets (sweeps/model/*.yaml): parameter counts on the meta device against the published
sizes and ModelSpec's closed form, and ModelSpec's checks of a model file."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bench.analysis.planner.shapes import llama_shape
from bench.config.compose import flavors, load_preset
from bench.schema.model import ModelInfo, ModelSpec
from fsdp_core.model import build_model, count_parameters

FLAVORS = flavors()
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
def test_every_preset_meta_count_equals_the_closed_form(name):
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
    model = FLAVORS[name]
    info = model.info()
    assert isinstance(info, ModelInfo)
    assert (info.params, info.non_embedding_params) == (model.params, model.non_embedding_params)
    assert info.model_dump() == {name: getattr(model, name) for name in ModelInfo.model_fields}
    assert llama_shape(model).info() == info  # the planner's view of the same model


def test_cpu_preset_sizes():
    assert FLAVORS["debug"].params == 156_480
    assert 5e6 <= FLAVORS["tiny"].params <= 20e6
    assert FLAVORS["tiny"].default_seq_len == 256


def test_changed_fields_recompute_derived_ones():
    preset = load_preset("model", "llama2-7b")
    args = preset.model_copy(update={"n_layers": 2, "n_heads": 16, "n_kv_heads": 16})
    assert (args.n_layers, args.head_dim) == (2, 256)
    assert args.params == 2 * 32000 * 4096 + 2 * FLAVORS["llama2-7b"].block_params + 4096
    assert count_parameters(build_model(args)) == args.params


def _problems(**changes) -> str:
    data = {**load_preset("model", "debug").model_dump(), **changes}
    with pytest.raises(ValidationError) as info:
        ModelSpec.model_validate(data)
    return str(info.value)


def test_a_model_file_that_makes_no_sense_is_refused_naming_the_field():
    assert "Extra inputs are not permitted" in _problems(layers=2)
    assert "dim=100 must be divisible by n_heads=3" in _problems(dim=100, n_heads=3)
    assert "n_heads=4 must be divisible by n_kv_heads=3" in _problems(n_kv_heads=3)
    assert "greater than or equal to 1" in _problems(n_layers=0)


def test_an_unknown_preset_lists_the_known_names():
    from bench.config.problems import ConfigError

    with pytest.raises(ConfigError, match="model: unknown model 'gpt5'; allowed: debug, llama2-13b, "):
        load_preset("model", "gpt5")
