"""Composing a grid once per group combination (bench/config/compose.py) gives what a plain Hydra compose of
each point gives: every field of the config, and the same validated spec and point id.

The reference composes each point alone with Hydra's own API, every override (group choices and
values alike) handed to Hydra, on mixed grids: several group choices crossed with scalar overrides,
experiments (which override group choices and set values), a user's config folder (models,
clusters, an experiment with an interpolation, a cluster file that also writes outside its own
node), and Hydra's `+`, `++` and `~` overrides.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bench.config import compose as config
from bench.config import groups
from bench.config.compose import compose, expand_grid, spec_from_config
from bench.config.registry import CONFIG_DIR_ENV, SHIPPED


def hydra_per_point(overrides: list[str], user_dir: Path | None) -> dict:
    """The reference: one plain Hydra compose of the point, resolved, without Hydra's own node."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    searchpath = [f"hydra.searchpath=[file://{user_dir}]"] if user_dir else []
    with initialize_config_dir(config_dir=str(SHIPPED), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=[*overrides, *searchpath])
    out = OmegaConf.to_container(cfg, resolve=True)
    out.pop("hydra", None)
    return out


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def user_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "configs"
    mini = {"name": "mini", "dim": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "ffn_dim": 64,
            "vocab_size": 256, "max_seq_len": 128}  # fmt: skip
    write(root, "model/mini.yaml", "".join(f"{key}: {value}\n" for key, value in mini.items()))
    write(
        root,
        "cluster/our-cpu.yaml",
        """\
        defaults:
          - _base
          - /device@device: cpu
          - _self_
        name: our-cpu
        device_type: cpu
        gpus_per_node: 4
        intra_node_gbps: 16.0
        inter_node_gbps: 4.0
        """,
    )
    # A cluster file that also writes outside its own node: composing it changes more than `cluster`,
    # so it cannot be combined from its own compose and takes a whole Hydra compose (without that,
    # `site` would be missing and the comparison would fail). Its `gpus_per_node` loses to the
    # primary config's, which merges after the groups.
    write(
        root,
        "cluster/wide-cpu.yaml",
        """\
        # @package _global_
        defaults:
          - /cluster/_base@cluster
          - /device@cluster.device: cpu
          - _self_
        cluster:
          name: wide-cpu
          device_type: cpu
          gpus_per_node: 2
          intra_node_gbps: 8.0
          inter_node_gbps: 2.0
        gpus_per_node: 2
        site:
          rack: b12
        """,
    )
    write(
        root,
        "experiment/ours.yaml",
        """\
        # @package _global_
        defaults:
          - override /model: mini
          - override /cluster: our-cpu
        model:
          n_layers: 1
        train:
          seq_len: 48
        sweep:
          name: ours-${model.name}-${train.seq_len}
          grid:
            nodes: "1,2"
        """,
    )
    monkeypatch.setenv(CONFIG_DIR_ENV, str(root))
    return root


def assert_same_as_hydra(grid: list[str], user_dir: Path | None = None) -> int:
    """Every point of the grid: the config (every field), the spec and the point id; returns the count."""
    points = expand_grid(grid)
    for overrides in points:
        ours, reference = compose(overrides), hydra_per_point(overrides, user_dir)
        assert ours == reference, overrides
        ours_spec, reference_spec = spec_from_config(ours), spec_from_config(reference)
        assert ours_spec.model_dump() == reference_spec.model_dump(), overrides
        assert ours_spec.point_id == reference_spec.point_id
    return len(points)


def test_mixed_grid_of_group_choices_and_values():
    before = groups.compose_groups.cache_info().misses
    n = assert_same_as_hydra(
        [
            "model=tiny,debug",
            "strategy=full_shard,hybrid_shard",
            "precision=fp32,bf16_pure",
            "cluster=local-cpu",
            "nodes=1,2",
            "train.seq_len=32",
            "model.n_layers=2",
            "train.activation_checkpointing=full",
            "cluster.inter_node_gbps=2.5",
        ]
    )
    assert n == 16
    # 8 group combinations from at most 1 + 2 + 2 + 2 + 1 Hydra composes (fewer when cached).
    assert groups.compose_groups.cache_info().misses - before <= 8


def test_experiments_override_group_choices_and_values():
    # cpu_scaling chooses tiny and sets the sequence; the command line wins over both.
    n = assert_same_as_hydra(["experiment=cpu_scaling", "model=debug", "precision=bf16", "train.seq_len=16"])
    assert n == 4  # the experiment's 2 x 2 grid
    assert assert_same_as_hydra(["experiment=cpu_smoke", "strategy=no_shard", "nodes=1"]) == 2


def test_user_config_dir_interpolations_and_add_delete_overrides(user_dir):
    n = assert_same_as_hydra(
        [
            "experiment=ours",
            "model=mini,tiny",
            "cluster=our-cpu,wide-cpu,local-cpu",
            "++train.seed=7",
            "~debug.hang",
            "+extra=1",
        ],  # fmt: skip
        user_dir,
    )
    assert n == 12
    cfg = compose(["experiment=ours", "model=tiny", "train.seq_len=64", "cluster=wide-cpu"])
    # The interpolation resolves after the point's own overrides, as in Hydra.
    assert cfg["sweep"]["name"] == "ours-tiny-64"
    assert (cfg["site"], cfg["gpus_per_node"], cfg["cluster"]["gpus_per_node"]) == ({"rack": "b12"}, 1, 2)
    # Hydra's rules for deleting: a null value counts as absent.
    with pytest.raises(config.ConfigError, match="debug.slow_rank: cannot delete"):
        compose(["~debug.slow_rank"])
