"""`fsdp-bench check` and `fsdp-bench baseline save` as a user runs them (subprocesses)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.check.synthetic import SYNTHETIC_ENV, make_record, step_times
from bench.records import write_record


def fsdp_bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def write_results(root: Path, seed: int, scale: float = 1.0, **kwargs) -> Path:
    """A results folder with two synthetic points of 40 timed steps each."""
    for nodes, median in ((1, 0.05), (2, 0.08)):
        record = make_record(step_times(median * scale, 0.02, 40, seed=seed + nodes), spec={"nodes": nodes}, **kwargs)
        write_record(record, root / "adhoc" / record.point_id / "result.json")
    return root


def test_check_against_itself_passes_and_writes_outputs(tmp_path):
    results = write_results(tmp_path / "results", seed=1)
    junit, summary = tmp_path / "check.xml", tmp_path / "summary.md"
    proc = fsdp_bench("check", results, "--baseline", results, "--junit", junit, "--summary", summary)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "PASS (2 point(s) compared, 14 metric(s))"
    header = next(line for line in lines if line.startswith("point"))
    assert header.split() == ["point", "metric", "baseline", "current", "change", "verdict", "confidence"]
    tps = [line for line in lines if " tokens_per_s " in line]
    assert len(tps) == 2 and all("+0.00%" in line and " ok " in line for line in tps)
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "0"
    assert summary.read_text().startswith("## fsdp-bench check: PASS")


def test_saved_baseline_detects_slowdown_and_gates_counters_only_on_request(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    saved = tmp_path / "baselines" / "b.json"
    proc = fsdp_bench("baseline", "save", base, "-o", saved)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"saved 2 point(s) (2 run(s)) to {saved}")
    slow = write_results(tmp_path / "slow", seed=7, scale=1.25)
    proc = fsdp_bench("check", slow, "--baseline", saved)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].startswith("FAIL: 4 regression(s)")  # tokens/s and step time, 2 points
    proc = fsdp_bench("check", slow, "--baseline", saved, "--no-gate-timings")
    assert proc.returncode == 0
    assert "regression (not gating)" in proc.stdout
    assert "(timings not gating)" in proc.stdout


def test_changed_counter_fails_even_when_timings_do_not_gate(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    cur = write_results(
        tmp_path / "cur", seed=2, comm={"all_gather": 1_000_512, "reduce_scatter": 500_000, "all_reduce": 0}
    )
    proc = fsdp_bench("check", cur, "--baseline", base, "--no-gate-timings")
    assert proc.returncode == 1
    failing = [line for line in proc.stdout.splitlines() if "REGRESSION" in line]
    assert len(failing) == 2
    assert all(
        line.split()[5:10] == ["comm_bytes_per_step.all_gather", "1,000,000", "1,000,512", "+0.05%", "REGRESSION"]
        for line in failing
    )


def test_environment_change_is_refused_then_allowed(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    cur = write_results(tmp_path / "cur", seed=2, env={**SYNTHETIC_ENV, "device_name": "other-cpu"})
    proc = fsdp_bench("check", cur, "--baseline", base)
    assert proc.returncode == 2
    assert "environment changed: device_name: synthetic-cpu -> other-cpu" in proc.stderr
    assert "refused: timings from different environments are not comparable" in proc.stderr
    proc = fsdp_bench("check", cur, "--baseline", base, "--allow-env-change")
    assert proc.returncode == 0
    assert "comparing anyway (--allow-env-change)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--threshold", "tokens_per_s:+5%"],
            "error: --threshold 'tokens_per_s:+5%': tokens_per_s is higher-is-better",
        ),
        (["--alpha", "2"], "error: --alpha: must be between 0 and 1, got 2.0"),
    ],
)
def test_invalid_input_exits_2(tmp_path, args, message):
    results = write_results(tmp_path / "results", seed=1)
    proc = fsdp_bench("check", results, "--baseline", results, *args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == message or proc.stderr.startswith(message)


def test_nothing_comparable_exits_2(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    other = make_record(step_times(0.05, 0.02, 20, seed=3), spec={"strategy": "no_shard"})
    write_record(other, tmp_path / "cur" / "adhoc" / other.point_id / "result.json")
    proc = fsdp_bench("check", tmp_path / "cur", "--baseline", base)
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[-1] == "NOTHING COMPARABLE: no current point matches a baseline point"


def test_baseline_save_without_ok_records_exits_2(tmp_path):
    failed = make_record([], status="failed")
    write_record(failed, tmp_path / "r" / "adhoc" / failed.point_id / "result.json")
    proc = fsdp_bench("baseline", "save", tmp_path / "r", "-o", tmp_path / "b.json")
    assert proc.returncode == 2
    assert "no ok result records to save" in proc.stderr
    assert not (tmp_path / "b.json").exists()
