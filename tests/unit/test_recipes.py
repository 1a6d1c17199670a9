"""Every strategy and precision recipe (bench/schema/recipes.py) is covered by every consumer.

A recipe is the one home of what a strategy or precision means; this test fails when a consumer
(the config tree, the schema, the engine, the planner, MFU, the report's labels) does not know one.
"""

from __future__ import annotations

import pytest

from bench.analysis.planner import predict
from bench.config.compose import load_preset, spec_from_fields
from bench.config.registry import group_options
from bench.config.rules import launch_problems
from bench.schema import recipes
from bench.schema.spec import Precision, RunSpec, Strategy
from fsdp_core.precision import TORCH_DTYPES, compute_dtype, mixed_precision_policy

WORLD_SHAPES = [(1, 1), (2, 1), (1, 4), (2, 4), (4, 8)]


def test_the_config_tree_and_the_schema_offer_exactly_the_recipes():
    assert group_options("strategy") == sorted(recipes.STRATEGIES)
    assert group_options("precision") == sorted(recipes.PRECISIONS)
    assert set(Strategy.__args__) == set(recipes.STRATEGIES)
    assert set(Precision.__args__) == set(recipes.PRECISIONS)


@pytest.mark.parametrize("name", list(recipes.STRATEGIES))
def test_each_strategy_has_a_mesh_the_engine_and_the_planner_use(name):
    recipe = recipes.STRATEGIES[name]
    for nodes, gpus in WORLD_SHAPES:
        shape, names = recipe.mesh_layout(nodes, gpus)
        assert len(shape) == len(names) and "shard" in names
        product = 1
        for size in shape:
            product *= size
        assert product == nodes * gpus
        assert recipe.shard_degree(nodes, gpus) * recipe.replicas(nodes, gpus) == nodes * gpus
    prediction = predict(spec_from_fields(model="debug", strategy=name, nodes=2))
    assert prediction["comm_bytes_per_step"]["all_gather"] >= 0 and prediction["step_time_s"] > 0
    assert recipe.summary


@pytest.mark.parametrize("name", list(recipes.PRECISIONS))
def test_each_precision_has_dtypes_a_policy_a_peak_and_a_planner_rate(name):
    recipe = recipes.PRECISIONS[name]
    assert {recipe.param_dtype, recipe.reduce_dtype} <= set(TORCH_DTYPES)
    policy = mixed_precision_policy(name)
    assert compute_dtype(name) == TORCH_DTYPES[recipe.param_dtype]
    assert policy.param_dtype in (None, TORCH_DTYPES[recipe.param_dtype])
    h100 = load_preset("cluster", "h100-8x")
    assert recipe.peak_dtype in h100.peak_tflops and recipe.mfu_peak_dtype in h100.peak_tflops
    spec = spec_from_fields(model="debug", cluster="h100-8x", precision=name, gpus_per_node=8)
    assert launch_problems(spec) == []
    assert predict(spec)["mfu"] > 0
    for device in ("cpu", "cuda"):
        cluster = "local-cpu" if device == "cpu" else "h100-8x"
        allowed = device in recipe.device_types
        problems = launch_problems(
            RunSpec.model_validate({**spec.model_dump(), "cluster": load_preset("cluster", cluster)})
        )
        assert (not any(p.startswith("precision:") for p in problems)) == allowed, (device, problems)


def test_a_record_carries_the_recipes_it_ran_with():
    from bench.schema.record import recipe_of

    spec = spec_from_fields(model="debug", strategy="hybrid_shard", precision="bf16_pure", nodes=2)
    recipe = recipe_of(spec)
    assert recipe.strategy["mesh"] == "hybrid" and recipe.strategy["reshard_after_forward"] is True
    assert (recipe.precision["param_dtype"], recipe.precision["reduce_dtype"]) == ("bfloat16", "bfloat16")
