"""Planning many points: the eks_llama2 grid (30 points) through the planner, as `fsdp-bench plan` does."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def eks_specs():
    from bench.config.compose import load_grid

    return [point.spec for point in load_grid(["experiment=eks_llama2"])]


def test_plan_eks_llama2_grid(benchmark, eks_specs):
    from bench.analysis.planner import predict, with_scaling_efficiency

    predictions = benchmark(lambda: with_scaling_efficiency([predict(spec) for spec in eks_specs]))
    assert len(predictions) == 30
    benchmark.extra_info["points"] = len(predictions)


def test_compose_eks_llama2_grid(benchmark):
    """Hydra composition and validation of the same grid (what `plan` and `sweep` pay before anything runs)."""
    from bench.config.compose import load_grid

    points = benchmark.pedantic(load_grid, args=(["experiment=eks_llama2"],), rounds=20, iterations=1)
    assert len(points) == 30
