"""Sweep planning without launching: experiments compose, repeats interleave, grouping, ledger rules."""

from __future__ import annotations

import pytest

from bench.analysis.records import write_record
from bench.config.compose import expand_grid, load_grid
from bench.config.registry import group_options
from bench.run.ledger import Ledger
from bench.run.sweep import expand_repeats, group_by_world_shape
from bench.schema.protocol import point_dir
from bench.schema.record import RunResult, model_info

EXPECTED_SIZES = {"cpu_smoke": 12, "cpu_scaling": 4, "eks_llama2": 30, "strategy_shootout": 25}


@pytest.mark.parametrize("experiment", group_options("experiment"))
def test_every_shipped_experiment_composes_and_validates(experiment):
    points = load_grid([f"experiment={experiment}"])
    assert len(points) == EXPECTED_SIZES[experiment]
    assert len({p.spec.point_id for p in points}) == len(points)
    assert {p.spec.sweep.name for p in points} == {experiment}


def test_eks_llama2_is_the_mission_grid():
    specs = [p.spec for p in load_grid(["experiment=eks_llama2"])]
    assert {s.model.name for s in specs} == {"llama2-7b", "llama2-13b", "llama2-70b"}
    assert sorted({s.nodes for s in specs}) == [1, 2, 4, 8, 16]
    assert {s.strategy for s in specs} == {"full_shard", "hybrid_shard"}
    train = {
        (s.precision, s.train.seq_len, s.train.activation_checkpointing, s.gpus_per_node, s.cluster.name) for s in specs
    }
    assert train == {("bf16", 4096, "full", 8, "p5.48xlarge")}


def test_inline_grid_crosses_with_the_experiment_and_the_command_line_wins():
    points = load_grid(["experiment=cpu_smoke", "nodes=1", "strategy=full_shard,no_shard"])
    assert len(points) == 4  # 1 node x 2 strategies x the experiment's 2 precisions
    assert {p.spec.nodes for p in points} == {1}


def test_grid_axes_come_in_order_and_cross_with_the_first_slowest():
    # The experiment's sweep.grid keys first, then the command line's; a later override of a key
    # replaces its values in the key's place; range() and choice() list their values.
    grid = expand_grid(["experiment=cpu_smoke", "nodes=range(1,3)", "model=tiny,debug", "strategy=no_shard",
                        "~debug.hang", "train.seq_len=choice(16,32)", "precision=bf16"])  # fmt: skip
    fixed = ["strategy=no_shard", "precision=bf16", "experiment=cpu_smoke"]
    assert grid == [
        [f"nodes={nodes}", *fixed, f"model={model}", "~debug.hang=null", f"train.seq_len={seq}"]
        for nodes in (1, 2)
        for model in ("tiny", "debug")
        for seq in (16, 32)
    ]


def test_glob_lists_a_groups_options_and_sweeps_without_values_are_refused():
    from bench.config.problems import ConfigError

    assert expand_grid(["model=glob(llama2-*,exclude=*70b)"]) == [["model=llama2-13b"], ["model=llama2-7b"]]
    assert expand_grid(["cluster=glob(p5*)"]) == [[f"cluster={c}"] for c in group_options("cluster") if c[:2] == "p5"]
    for override, line in [
        ("nodes=interval(1,2)", "nodes: interval(...) has no values to list; allowed: a,b,..., range(...), choice(...), glob(...)"),
        ("nodes=glob(1*)", "nodes: glob(...) lists a config group's options; allowed: model, strategy, precision, cluster, launcher, experiment"),
    ]:  # fmt: skip
        with pytest.raises(ConfigError) as err:
            expand_grid([override])
        assert err.value.lines == [line]


def test_repeats_are_interleaved_and_have_distinct_ids():
    points = load_grid(["experiment=cpu_smoke", "nodes=1", "strategy=full_shard", "precision=fp32,bf16"])
    specs = expand_repeats(points, 3)
    assert [s.repeat for s in specs] == [0, 0, 1, 1, 2, 2]
    assert [s.precision for s in specs] == ["fp32", "bf16"] * 3
    assert len({s.point_id for s in specs}) == 6


def test_points_of_one_world_shape_share_a_launch_in_order():
    specs = [p.spec for p in load_grid(["experiment=cpu_scaling"])]
    groups = group_by_world_shape(specs, grouped=True)
    assert [(g[0].nodes, g[0].gpus_per_node, len(g)) for g in groups] == [(1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1)]
    smoke = [p.spec for p in load_grid(["experiment=cpu_smoke"])]
    assert [len(g) for g in group_by_world_shape(smoke, grouped=True)] == [6, 6]
    assert [len(g) for g in group_by_world_shape(smoke, grouped=False)] == [1] * 12


def _record(spec, status):
    return RunResult(
        point_id=spec.point_id,
        sweep=spec.sweep.name,
        status=status,
        spec=spec,
        model_info=model_info(spec),
        error=None if status == "ok" else "boom",
    )


@pytest.mark.parametrize(
    ("status", "force", "retry_failed", "runs"),
    [
        ("ok", False, False, False),
        ("ok", True, False, True),
        ("failed", False, False, False),
        ("timeout", False, True, True),
        ("oom", False, True, True),
        ("interrupted", False, False, True),
    ],
)
def test_ledger_rules(tmp_path, status, force, retry_failed, runs):
    spec = load_grid(["experiment=cpu_smoke", "nodes=1", "strategy=full_shard", "precision=fp32"])[0].spec
    write_record(_record(spec, status), point_dir(tmp_path, spec) / "result.json")
    decision = Ledger(tmp_path, spec.sweep.name, force=force, retry_failed=retry_failed).decide(spec)
    assert decision.run is runs
    assert decision.previous.status == status


def test_ledger_reruns_an_unknown_schema_version(tmp_path):
    spec = load_grid(["experiment=cpu_smoke", "nodes=1", "strategy=full_shard", "precision=fp32"])[0].spec
    path = point_dir(tmp_path, spec) / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 99}')
    decision = Ledger(tmp_path, spec.sweep.name).decide(spec)
    assert decision.run and "schema_version 99 is unknown" in decision.reason


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["precision=fp8,bf16"], "precision: p4d.24xlarge's devices have no fp8 tensor cores; allowed: fp32, bf16,"),
        (["gpus_per_node=16"], "gpus_per_node: 16 exceeds the 8 GPUs of a p4d.24xlarge node; allowed: 1..8"),
        (["cluster.link_latency_s=-1"], "cluster.link_latency_s: Input should be greater than or equal to 0"),
        (["cluster.efa_devices=-3"], "cluster.efa_devices: Input should be greater than or equal to 0"),
    ],
)
def test_cluster_grids_refuse_what_the_hardware_cannot_do(overrides, message):
    from bench.config.problems import ConfigError

    base = ["model=llama2-7b", "cluster=p4d.24xlarge", "gpus_per_node=8", "launcher=kubeflow"]
    with pytest.raises(ConfigError) as err:
        load_grid([*base, *overrides])
    assert any(message in line for line in err.value.lines), err.value.lines


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("repeats", 0, "sweep.repeats: Input should be greater than or equal to 1"),
        ("repeats", True, "sweep.repeats: Input should be a valid integer"),
        ("force", "maybe", "sweep.force: got 'maybe'; allowed: true, false"),
    ],
)
def test_sweep_settings_are_checked(key, value, message):
    from bench.config.compose import compose, sweep_options
    from bench.config.problems import ConfigError

    settings = compose(["experiment=cpu_smoke"])["sweep"] | {key: value}
    with pytest.raises(ConfigError) as err:
        sweep_options({"sweep": settings})
    assert err.value.lines == [message]
