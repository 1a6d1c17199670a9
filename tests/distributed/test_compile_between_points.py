"""torch.compile state never leaks from one point of a launch into the next.

A launch runs several points of one world shape in one process. Without a dynamo reset between
them, the second shape recompiles with dynamic shapes (other kernels than a lone run of the same
point) and the ninth distinct configuration hits dynamo's recompile limit, a failure under
fullgraph=True. The `aot_eager` backend keeps this test fast: the recompile limit and the cache
entries are counted by the counting backend, whatever backend it wraps.
"""

from __future__ import annotations

import pytest
from dist_helpers import debug_spec, run_engine

pytestmark = pytest.mark.ranks

# Ten compiled points that differ in model shape, precision and sequence length: more distinct
# configurations than dynamo's recompile limit (8).
VARIANTS = [
    {"precision": "fp32", "seq_len": 32},
    {"precision": "bf16", "seq_len": 32},
    {"precision": "bf16_pure", "seq_len": 48},
    {"precision": "fp16", "seq_len": 16},
    {"precision": "fp32", "seq_len": 64},
    {"precision": "bf16", "seq_len": 24, "model.n_layers": 1},
    {"precision": "fp32", "seq_len": 40, "model.dim": 32, "model.n_heads": 2, "model.n_kv_heads": 1},
    {"precision": "bf16", "seq_len": 56, "model.ffn_dim": 96},
    {"precision": "fp32", "seq_len": 8},
    {"precision": "bf16_pure", "seq_len": 72, "model.n_layers": 3},
]


def compiled_spec(**fields):
    return debug_spec(
        compile=True, compile_backend="aot_eager", steps=3, warmup_steps=2, **{"sweep.name": "compile"}, **fields
    )


@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_grouped_compiled_points_compile_as_if_each_ran_alone(tmp_path):
    specs = [compiled_spec(**fields) for fields in VARIANTS]
    grouped = run_engine(specs, tmp_path / "grouped")
    assert [grouped[s.point_id].status for s in specs] == ["ok"] * len(specs), [
        grouped[s.point_id].error for s in specs
    ]
    for spec in specs:
        # One static graph per point, exactly as alone: no recompilation, no dynamic-shape graph.
        assert grouped[spec.point_id].metrics.compile.model_dump() == {
            "graphs": 1,
            "cache_entries": 1,
            "graph_breaks": 0,
        }, spec.point_id
    last = specs[-1]
    alone = run_engine([last], tmp_path / "alone")[last.point_id]
    assert alone.metrics.compile == grouped[last.point_id].metrics.compile
    assert alone.metrics.losses == grouped[last.point_id].metrics.losses
