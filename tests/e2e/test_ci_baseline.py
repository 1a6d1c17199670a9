"""This project's CI: the cpu_smoke sweep against the committed baseline of deterministic counters.

Counters (communication bytes per step, parameters, FLOPs per token) gate exactly, loss curves
within the numerics guard's tolerance (a baseline file keeps no hosts, so never exactly); the
throughput comparison is printed but does not gate (`--no-gate-timings`): CI machines differ.
Regenerate the baseline after an intended change with
    fsdp-bench sweep results_dir=results report=false && fsdp-bench baseline save results -o baselines/cpu_smoke.json
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from bench_cli import fsdp_bench
from shared_launch import CPU_SMOKE_SWEEP, session_results

pytestmark = pytest.mark.ranks  # every test here starts ranks

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "baselines" / "cpu_smoke.json"


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory) -> Path:
    """The session's cpu_smoke sweep (tests/shared_launch.py; test_check_cli.py reads it too)."""
    sweep = lambda results: fsdp_bench(*CPU_SMOKE_SWEEP, f"results_dir={results}", timeout=840)  # noqa: E731
    return session_results(tmp_path_factory, "cpu_smoke", sweep)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cpu_smoke_counters_match_the_committed_baseline(cpu_smoke, tmp_path):
    results = cpu_smoke
    junit = tmp_path / "check.xml"
    check = fsdp_bench(
        "check",
        results,
        "--baseline",
        BASELINE,
        "--no-gate-timings",
        "--junit",
        junit,
        "--summary",
        tmp_path / "summary.md",
    )
    print(check.stdout)  # the throughput comparison, for the CI log
    assert check.rc == 0, check.stdout + check.stderr
    # 9 metrics a point: 5 counters, tokens/s and step time (no MFU on CPU), the loss curve, and
    # telemetry's utilization, which the committed baseline predates: `new`, never gating.
    assert check.stdout.splitlines()[-1].startswith("PASS (12 point(s) compared, 108 metric(s)")
    assert "60 counter(s) identical to the baseline and 12 loss curve(s) matching it (not listed)" in check.stdout
    assert check.stdout.count(" utilization ") == 12
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("108", "0")
    curves = [case.findtext("system-out") for case in suite.iter("testcase") if case.get("name") == "loss_curve"]
    assert len(curves) == 12 and all(text.endswith("loss curve matches (rtol 0.01)") for text in curves)
