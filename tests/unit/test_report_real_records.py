"""Reports from records of real `fsdp-bench run` invocations kept as fixtures (tests/fixtures/records/real).

Made on this 2-core CPU machine with model=debug train.steps=6: full_shard and no_shard at
nodes=1 and 2, plus one point failed on purpose (debug.fail_rank=1 debug.fail_step=3). Their
numbers are whatever the machine measured, so the tests recompute expectations from the JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import REAL_DIR  # noqa: E402

from bench.analysis.records import load_records  # noqa: E402
from bench.analysis.report.views import analyse  # noqa: E402
from reports.report.build import build_report  # noqa: E402


@pytest.fixture(scope="module")
def real():
    records, problems = load_records(REAL_DIR)
    assert problems == []
    return records


def _raw(strategy: str, nodes: int) -> dict:
    for path in REAL_DIR.rglob("result.json"):
        data = json.loads(path.read_text())
        if data["status"] == "ok" and data["spec"]["strategy"] == strategy and data["spec"]["nodes"] == nodes:
            return data
    raise AssertionError(f"no real record for {strategy} at {nodes} node(s)")


def test_fixtures_are_the_five_real_points(real):
    assert sorted((r.spec.strategy, r.spec.nodes, r.status) for r in real) == [
        ("full_shard", 1, "ok"), ("full_shard", 2, "failed"), ("full_shard", 2, "ok"),
        ("no_shard", 1, "ok"), ("no_shard", 2, "ok")]  # fmt: skip


@pytest.mark.parametrize("strategy", ["full_shard", "no_shard"])
def test_efficiency_matches_the_recorded_throughputs(real, strategy):
    one, two = _raw(strategy, 1), _raw(strategy, 2)
    expected = (two["metrics"]["tokens_per_s"] / one["metrics"]["tokens_per_s"]) / 2
    scaling = analyse(real).scaling
    row = scaling[(scaling["strategy"] == strategy) & (scaling["nodes"] == 2)].iloc[0]
    assert row["mode"] == "weak" and row["baseline_nodes"] == 1
    assert row["scaling_efficiency"] == pytest.approx(expected)
    assert row["tokens_per_s_per_device"] == pytest.approx(two["metrics"]["tokens_per_s_per_device"])


def test_report_of_real_records(real, tmp_path):
    page = build_report(real, tmp_path).read_text()
    failed = next(r for r in real if r.status == "failed")
    assert failed.error in page  # "rank 1: RuntimeError: debug: injected failure on rank 1 at step 3"
    assert "injected failure on rank 1 at step 3" in (tmp_path / "summary.md").read_text()
    # CPU has no published peak FLOP/s: no MFU plot, and the page says why, quoting the record.
    assert not (tmp_path / "mfu.png").exists()
    assert "is not in the peak-FLOPs table" in page
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "throughput.png",
        "efficiency.png",
        "tokens_per_device.png",
        "memory.png",
        "step_times.png",
    }
    assert "2.13.0+cpu" in page and "cpu (x86_64)" in page
