"""The Hydra config tree (sweeps/) composed into validated RunSpecs (bench/config/compose.py)."""

from __future__ import annotations

import pytest

from bench.config.compose import compose, flavors, load_point
from bench.config.problems import ConfigError
from bench.config.registry import group_options
from bench.schema.recipes import PRECISIONS, STRATEGIES
from bench.schema.spec import LAUNCHERS

FLAVORS = flavors()

# The config keys other tools depend on (dotted paths in the composed config; docs/configuration.md).
CONTRACT_KEYS = [
    "model",
    "nodes",
    "gpus_per_node",
    "strategy",
    "precision",
    "cluster",
    "launcher",
    "train.seq_len",
    "train.micro_batch",
    "train.grad_accum",
    "train.steps",
    "train.warmup_steps",
    "train.activation_checkpointing",
    "train.compile",
    "train.cpu_offload",
    "results_dir",
    "debug.fail_rank",
    "debug.fail_step",
    "debug.hang",
    "debug.oom",
    "debug.slow_fraction",
]


def error_lines(*overrides: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_point(list(overrides))
    return info.value.lines


def test_config_groups_offer_exactly_the_registries():
    assert group_options("model") == sorted(FLAVORS)
    assert group_options("strategy") == sorted(STRATEGIES)
    assert group_options("precision") == sorted(PRECISIONS)
    assert {"local-cpu", "p5.48xlarge", "p4de.24xlarge", "h100-8x"} <= set(group_options("cluster"))
    assert {"h100-sxm", "h200", "a100-80gb", "cpu"} <= set(group_options("device"))
    assert group_options("launcher") == sorted(LAUNCHERS)


def test_contract_keys_exist():
    cfg = compose([])
    for key in CONTRACT_KEYS:
        node = cfg
        for part in key.split("."):
            assert part in node, key
            node = node[part]


def test_defaults():
    spec = load_point([]).spec
    train = spec.train
    assert (spec.model.name, spec.nodes, spec.gpus_per_node, spec.world_size) == ("tiny", 1, 1, 1)
    assert (spec.strategy, spec.precision, spec.cluster.name, spec.launcher) == (
        "full_shard",
        "fp32",
        "local-cpu",
        "local",
    )
    assert (train.seq_len, train.micro_batch, train.grad_accum, train.steps, train.warmup_steps) == (256, 1, 1, 8, 2)
    assert (spec.device_type, train.activation_checkpointing, train.compile, train.cpu_offload) == (
        "cpu",
        "none",
        False,
        False,
    )
    assert spec.sweep.name == "adhoc" and spec.sweep.point_timeout_s == 600
    # The spec carries the resolved facts of its model and cluster (the registry's files).
    assert (spec.model.dim, spec.model.n_layers, spec.cluster.device.name, spec.cluster.device_memory_gib) == (
        256,
        4,
        "cpu",
        16,
    )


def test_overrides_reach_the_spec():
    point = load_point(
        [
            "model=llama2-7b",
            "model.n_layers=2",
            "nodes=2",
            "gpus_per_node=8",
            "cluster=h100-8x",
            "strategy=hybrid_shard",
            "precision=bf16",
            "train.seq_len=128",
            "train.micro_batch=2",
            "train.grad_accum=4",
            "train.steps=5",
            "train.warmup_steps=1",
            "train.activation_checkpointing=selective",
            "sweep.name=mine",
            "sweep.point_timeout_s=30",
            "debug.slow_fraction=0.5",
        ]
    )
    spec, train = point.spec, point.spec.train
    assert spec.model.overrides == {"n_layers": 2}
    assert spec.model.n_layers == 2 and spec.model.dim == 4096
    assert (spec.world_size, spec.device_type, spec.strategy, spec.precision) == (16, "cuda", "hybrid_shard", "bf16")
    assert (train.seq_len, train.micro_batch, train.grad_accum, train.steps, train.warmup_steps) == (128, 2, 4, 5, 1)
    assert train.activation_checkpointing == "selective_op"  # a user's `selective`: the per-op policy
    assert (spec.sweep.name, spec.sweep.point_timeout_s, spec.debug.slow_fraction) == ("mine", 30, 0.5)
    assert point.overrides[0] == "model=llama2-7b"


def test_unknown_group_options_name_the_field_and_allowed_values():
    assert error_lines("model=gpt5", "strategy=zero9") == [
        f"model: unknown model 'gpt5'; allowed: {', '.join(sorted(FLAVORS))}",
        f"strategy: unknown strategy 'zero9'; allowed: {', '.join(sorted(STRATEGIES))}",
    ]


def test_every_broken_rule_is_reported():
    assert error_lines("train.seq_len=9999", "train.warmup_steps=9") == [
        "train.seq_len: 9999 exceeds tiny's maximum 2048",
        "train.warmup_steps: must be fewer than train.steps (9 >= 8)",
    ]


def test_field_names_are_the_config_keys_a_user_types():
    assert error_lines("train.micro_batch=0") == ["train.micro_batch: Input should be greater than or equal to 1"]
    assert error_lines("sweep.point_timeout_s=0") == ["sweep.point_timeout_s: Input should be greater than 0"]
    assert error_lines("model=debug", "model.n_heads=3") == ["model: dim=64 must be divisible by n_heads=3"]


def test_unknown_keys_and_grids_are_refused():
    (line,) = error_lines("train.stepz=3")
    assert line.startswith(
        "train.stepz: unknown key 'stepz' (did you mean steps?); allowed under train: ac_every, ac_save_ops, "
        "activation_checkpointing,"
    )
    assert "steps" in line and "warmup_steps" in line
    assert error_lines("nodes=1,2") == ["a comma-separated override makes a grid: use `fsdp-bench sweep` for grids"]
