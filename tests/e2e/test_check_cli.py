"""`fsdp-bench check` and `fsdp-bench baseline save` as a user runs them: the console script's code in
this process (tests/bench_cli.py), `ab` and `run` as processes of their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from bench_cli import fsdp_bench
from shared_launch import CPU_SMOKE_SWEEP, session_results

from bench.analysis.check.synthetic import SYNTHETIC_ENV, make_record, step_times
from bench.analysis.records import load_records, write_record


def write_results(root: Path, seed: int, scale: float = 1.0, repeats: int = 2, **kwargs) -> Path:
    """A results folder with two synthetic points, `repeats` runs of 20 timed steps each."""
    for nodes, median in ((1, 0.05), (2, 0.08)):
        for r in range(repeats):
            times = step_times(median * scale, 0.02, 20, seed=seed + nodes + 10 * r)
            record = make_record(times, spec={"nodes": nodes, "repeat": r}, **kwargs)
            write_record(record, root / "adhoc" / record.point_id / "result.json")
    return root


def test_check_against_itself_passes_and_writes_outputs(tmp_path):
    results = write_results(tmp_path / "results", seed=1)
    junit, summary = tmp_path / "check.xml", tmp_path / "summary.md"
    proc = fsdp_bench("check", results, "--baseline", results, "--junit", junit, "--summary", summary)
    assert proc.rc == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "PASS (2 point(s) compared, 14 metric(s))"
    header = next(line for line in lines if line.startswith("point"))
    assert header.split() == ["point", "metric", "baseline", "current", "change", "verdict", "confidence"]
    tps = [line for line in lines if " tokens_per_s " in line]
    assert len(tps) == 2 and all("+0.00%" in line for line in tps)
    # ok, unless 2 runs a side could not have detected a 5% change (not gated, with its reason below
    # the table); what a row detects at 95 % includes the threshold, so it is above 5 % either way.
    for line in tps:
        assert float(line.rsplit("detects>=", 1)[1].rstrip("%")) > 5.0
        assert " ok " in line or " not gated " in line
    not_gated = sum(" not gated " in line for line in tps)
    assert sum(line.startswith("not gated: tokens_per_s: the runs' noise hides") for line in lines) == not_gated
    assert "10 counter(s) identical to the baseline (not listed)" in lines
    assert not any(" params " in line for line in lines)
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "0"
    assert summary.read_text().startswith("## fsdp-bench check: PASS")


def test_saved_baseline_detects_slowdown_and_gates_counters_only_on_request(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    saved = tmp_path / "baselines" / "b.json"
    proc = fsdp_bench("baseline", "save", base, "-o", saved)
    assert proc.rc == 0, proc.stderr
    assert proc.stdout.startswith(f"saved 2 point(s) (4 run(s)) to {saved}")
    slow = write_results(tmp_path / "slow", seed=7, scale=1.25)
    proc = fsdp_bench("check", slow, "--baseline", saved)
    assert proc.rc == 1
    assert proc.stdout.splitlines()[-1].startswith("FAIL: 4 regression(s)")  # tokens/s and step time, 2 points
    proc = fsdp_bench("check", slow, "--baseline", saved, "--no-gate-timings")
    assert proc.rc == 0
    assert "regression (not gating)" in proc.stdout
    assert "(timings not gating)" in proc.stdout


def test_one_run_per_side_is_insufficient_unless_min_runs_is_1(tmp_path):
    base = write_results(tmp_path / "base", seed=1, repeats=1)
    slow = write_results(tmp_path / "slow", seed=7, scale=1.25, repeats=1)  # tokens/s 20% lower
    junit, summary = tmp_path / "check.xml", tmp_path / "summary.md"
    proc = fsdp_bench("check", slow, "--baseline", base, "--junit", junit, "--summary", summary)
    assert proc.rc == 0, proc.stdout + proc.stderr
    hint = "1 run per side: per-step samples miss run-to-run noise; use sweep.repeats>=2 or fsdp-bench ab"
    lines = proc.stdout.splitlines()
    assert f"insufficient: {hint}" in lines
    tps = [line.split() for line in lines if " tokens_per_s " in line]
    assert [row[10:13] for row in tps] == [[row[10], "insufficient", "runs=1/1"] for row in tps]
    assert all(row[10].startswith("-") for row in tps)
    assert lines[-1] == "PASS (2 point(s) compared, 14 metric(s))"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "4")  # tokens/s and step time, 2 points
    assert all(hint in case.get("message") for case in suite.iter("skipped"))
    assert f"Insufficient: {hint}." in summary.read_text()
    proc = fsdp_bench("check", slow, "--baseline", base, "--min-runs", "1")
    assert proc.rc == 1
    assert proc.stdout.splitlines()[-1].startswith("FAIL: 4 regression(s)")


def test_changed_counter_fails_even_when_timings_do_not_gate(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    cur = write_results(
        tmp_path / "cur", seed=2, comm={"all_gather": 1_000_512, "reduce_scatter": 500_000, "all_reduce": 0}
    )
    proc = fsdp_bench("check", cur, "--baseline", base, "--no-gate-timings")
    assert proc.rc == 1
    failing = [line for line in proc.stdout.splitlines() if "REGRESSION" in line]
    assert len(failing) == 2
    assert all(
        line.split()[7:12] == ["comm_bytes_per_step.all_gather", "1,000,000", "1,000,512", "+0.05%", "REGRESSION"]
        for line in failing
    )


def test_environment_change_is_refused_then_allowed(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    cur = write_results(tmp_path / "cur", seed=2, env={**SYNTHETIC_ENV, "device_name": "other-cpu"})
    proc = fsdp_bench("check", cur, "--baseline", base)
    assert proc.rc == 2
    assert "environment changed: device_name: synthetic-cpu -> other-cpu" in proc.stderr
    assert "refused: timings from different environments are not comparable" in proc.stderr
    proc = fsdp_bench("check", cur, "--baseline", base, "--allow-env-change")
    assert proc.rc == 0
    assert "comparing anyway (--allow-env-change)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--threshold", "tokens_per_s:+5%"],
            "error: --threshold 'tokens_per_s:+5%': tokens_per_s is higher-is-better",
        ),
        (["--alpha", "2"], "error: --alpha: must be between 0 and 1, got 2.0"),
        (["--min-runs", "0"], "error: --min-runs: must be an integer >= 1, got 0"),
    ],
)
def test_invalid_input_exits_2(tmp_path, args, message):
    results = write_results(tmp_path / "results", seed=1)
    proc = fsdp_bench("check", results, "--baseline", results, *args)
    assert proc.rc == 2
    assert proc.stderr.strip() == message or proc.stderr.startswith(message)


def test_nothing_comparable_exits_2(tmp_path):
    base = write_results(tmp_path / "base", seed=1)
    other = make_record(step_times(0.05, 0.02, 20, seed=3), spec={"strategy": "no_shard"})
    write_record(other, tmp_path / "cur" / "adhoc" / other.point_id / "result.json")
    proc = fsdp_bench("check", tmp_path / "cur", "--baseline", base)
    assert proc.rc == 2
    assert proc.stdout.splitlines()[-1] == "NOTHING COMPARABLE: no current point matches a baseline point"


def test_baseline_save_without_ok_records_exits_2(tmp_path):
    failed = make_record([], status="failed")
    write_record(failed, tmp_path / "r" / "adhoc" / failed.point_id / "result.json")
    proc = fsdp_bench("baseline", "save", tmp_path / "r", "-o", tmp_path / "b.json")
    assert proc.rc == 2
    assert "no ok result records to save" in proc.stderr
    assert not (tmp_path / "b.json").exists()


# A stand-in for another environment's fsdp-bench: `run ... results_dir=X` writes a synthetic record
# whose step times are scaled by $AB_SLOW, seeded by X so every run differs.
FAKE_FSDP_BENCH = """
import os, sys, zlib
from pathlib import Path
from bench.analysis.check.synthetic import make_record, step_times
from bench.analysis.records import write_record
args = sys.argv[1:]
assert args[0] == "run", args
results = Path(next(a.split("=", 1)[1] for a in args if a.startswith("results_dir=")))
scale = float(os.environ.get("AB_SLOW", "1"))
record = make_record(step_times(0.05 * scale, 0.02, 30, seed=zlib.crc32(str(results).encode())))
write_record(record, results / record.sweep / record.point_id / "result.json")
print("ok")
"""


@pytest.mark.ranks
def test_ab_alternates_sides_and_reports_the_ratio(tmp_path):
    fake = tmp_path / "fake_bench.py"
    fake.write_text(FAKE_FSDP_BENCH)
    out = tmp_path / "ab"
    proc = fsdp_bench(
        "ab",
        "--a",
        f"{sys.executable} {fake}",
        "--b",
        f"env AB_SLOW=1.25 {sys.executable} {fake}",
        "--rounds",
        "3",
        "-o",
        out,
        "model=debug",
    )
    assert proc.rc == 0, proc.stdout + proc.stderr
    progress = [line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("round ")]
    assert progress == [
        "round 1/3 A point 1/1",
        "round 1/3 B point 1/1",
        "round 2/3 B point 1/1",
        "round 2/3 A point 1/1",
        "round 3/3 A point 1/1",
        "round 3/3 B point 1/1",
    ]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("debug 1x1"))
    cells = row.split()
    assert cells[7] == "3/3"
    assert float(cells[10]) == pytest.approx(0.8, abs=0.02)  # B/A of tokens/s: steps 1.25x longer
    assert row.endswith("B slower")
    assert sorted(p.name for p in (out / "B").iterdir()) == ["round00", "round01", "round02"]
    summary = json.loads((out / "ab.json").read_text())
    assert [r["returncode"] for r in summary["runs"]] == [0] * 6
    assert summary["commands"]["B"][:2] == ["env", "AB_SLOW=1.25"]


def test_ab_reports_a_missing_command(tmp_path):
    missing = tmp_path / "no-such-fsdp-bench"
    proc = fsdp_bench("ab", "--b", missing, "--rounds", "1", "-o", tmp_path, "model=debug", separate=False)  # refused
    assert proc.rc == 2
    assert proc.stderr.strip() == f"error: --a/--b: command not found: {tmp_path / 'no-such-fsdp-bench'}"


def test_ab_rejects_invalid_overrides_before_running(tmp_path):
    proc = fsdp_bench("ab", "--rounds", "1", "-o", tmp_path / "ab", "model=nope", separate=False)  # refused here
    assert proc.rc == 2
    assert proc.stderr.startswith("error: model: unknown model 'nope'; allowed:")
    assert not (tmp_path / "ab").exists()


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory) -> Path:
    """The session's cpu_smoke sweep (tests/shared_launch.py; test_ci_baseline.py checks it whole)."""
    sweep = lambda results: fsdp_bench(*CPU_SMOKE_SWEEP, f"results_dir={results}", timeout=840)  # noqa: E731
    return session_results(tmp_path_factory, "cpu_smoke", sweep)


@pytest.mark.ranks
@pytest.mark.slow  # the first test of a session to ask runs the cpu_smoke sweep
@pytest.mark.timeout(900)
def test_check_on_real_records_against_themselves_and_their_baseline(cpu_smoke, tmp_path):
    # One real point of 2 ranks (full_shard, fp32) from the session's sweep, in a folder of its own.
    (point,) = [
        r
        for r in load_records(cpu_smoke)[0]
        if (r.spec.world_size, r.spec.strategy, r.spec.precision) == (2, "full_shard", "fp32")
    ]
    results = tmp_path / "results"
    shutil.copytree(cpu_smoke / point.sweep / point.point_id, results / point.sweep / point.point_id)
    proc = fsdp_bench("check", results, "--baseline", results, "--all-rows", "--min-runs", "1")
    assert proc.rc == 0, proc.stdout + proc.stderr
    rows = {line.split()[7]: line.split() for line in proc.stdout.splitlines() if line.startswith("debug 2x1")}
    assert rows["comm_bytes_per_step.all_gather"][11] == "ok"
    assert int(rows["comm_bytes_per_step.all_gather"][8].replace(",", "")) > 0  # 2 ranks shard and gather
    assert rows["tokens_per_s"][10:12] == ["+0.00%", "ok"]
    saved = tmp_path / "baseline.json"
    assert fsdp_bench("baseline", "save", results, "-o", saved).rc == 0
    proc = fsdp_bench("check", results, "--baseline", saved, "--junit", tmp_path / "j.xml")
    assert proc.rc == 0, proc.stdout + proc.stderr
    assert ET.parse(tmp_path / "j.xml").getroot().find("testsuite").get("failures") == "0"
    assert "tokens_per_s" in proc.stdout and " insufficient " in proc.stdout  # 1 run a side: not gating


@pytest.mark.ranks
def test_pytest_plugin_records_tokens_per_s_in_benchmark_json(tmp_path):
    (tmp_path / "test_point.py").write_text(
        "def test_debug_point(fsdp_point):\n"
        "    rec = fsdp_point('model=debug train.steps=8 train.warmup_steps=2')\n"
        "    assert rec.status == 'ok'\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",  # pytest-benchmark disables itself under xdist, which may run this very test
            "--benchmark-enable",
            "--benchmark-json",
            "bench.json",
            "test_point.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = json.loads((tmp_path / "bench.json").read_text())["benchmarks"]
    info = entry["extra_info"]
    assert info["point"] == "debug 1x1 full_shard fp32 mb=1 s=64"
    assert info["status"] == "ok" and info["timed_steps"] == 6
    assert info["tokens_per_s"] > 0
    assert info["fsdp_points"][0]["point_id"] == info["point_id"]
    assert entry["stats"]["rounds"] == 1
