"""`fsdp-bench sweep sweep.autotune=K` on real gloo ranks: a preflight of the setup's world shape
first, the K configurations the planner ranks best on the measured links, each record carrying its
predicted rank, and the report's predicted vs measured ranking."""

from __future__ import annotations

import pytest

from bench.analysis.planner.search import search
from bench.analysis.preflight import read_preflight

pytestmark = pytest.mark.ranks  # every test here starts ranks

SETUP = ["model=debug", "nodes=1", "gpus_per_node=2", "train.seq_len=32", "train.steps=3", "train.warmup_steps=1",
         "strategy=full_shard,no_shard", "precision=fp32", "train.micro_batch=1,2",
         "train.activation_checkpointing=none", "preflight.max_bytes=65536", "preflight.iters=3"]  # fmt: skip


@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_autotune_runs_the_top_k_ranked_on_the_preflight(fsdp_bench, tmp_path):
    run = fsdp_bench(
        "sweep", *SETUP, "sweep.autotune=2", "sweep.preflight=true", "sweep.name=tune", f"results_dir={tmp_path}",
        results=tmp_path, timeout=300,
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    assert "autotune: the 2 best of 4 configurations searched (4 fit), by predicted tokens_per_s" in run.stdout
    assert "preflight 1x2: ok; ranked again with its measured links" in run.stdout
    # Exactly the planner's top 2 when it plans with the preflight this sweep stored.
    preflight = read_preflight(tmp_path / "tune" / "_preflight" / "1x2")
    expected = search(SETUP, preflight=preflight).ranked[:2]
    by_rank = sorted(run.records, key=lambda r: r.prediction["autotune"]["rank"])
    assert [r.point_id for r in by_rank] == [c.point.spec.point_id for c in expected]
    for rank, (record, candidate) in enumerate(zip(by_rank, expected, strict=True), 1):
        assert record.status == "ok" and record.preflight is not None
        assert record.prediction["point_id"] == record.point_id  # the plan object `plan --json` prints
        autotune = record.prediction["autotune"]
        assert autotune == {"rank": rank, "value": candidate.value("tokens_per_s"), "objective": "tokens_per_s",
                            "searched": 4, "fitting": 4}  # fmt: skip
        assert record.prediction["assumptions"]["preflight"].startswith("1x2 ")
    html = (tmp_path / "tune" / "report" / "report.html").read_text()
    assert "Autotune: predicted vs measured ranking" in html
    winner = max(run.records, key=lambda r: r.metrics.tokens_per_s)
    assert f"predicted rank {winner.prediction['autotune']['rank']};" in html
    # One preflight only: the sweep did not measure the shape a second time.
    assert len(list((tmp_path / "tune" / "_preflight").rglob("preflight.json"))) == 1
