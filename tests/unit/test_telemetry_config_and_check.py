"""Telemetry's config (validation, outside the point id), its run-level check metrics, and `ab`'s
per-side overrides."""

from __future__ import annotations

import sys

import pytest
from bench_cli import in_process

from bench.analysis.check.compare import compare
from bench.analysis.check.points import points_from_records
from bench.analysis.check.synthetic import make_record, step_times
from bench.analysis.check.thresholds import ThresholdError, Thresholds, parse_threshold
from bench.config.compose import load_point
from bench.config.problems import ConfigError
from bench.run.ab import run_rounds
from bench.schema.telemetry import Telemetry

DEBUG = ["model=debug", "train.steps=4", "train.warmup_steps=1"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "telemetry.interval_ms=5",
            "telemetry.interval_ms: must be an integer number of milliseconds, at least 10; got 5",
        ),
        (
            "telemetry.interval_ms=12.5",
            "telemetry.interval_ms: must be an integer number of milliseconds, at least 10; got 12.5",
        ),
        (
            "telemetry.interval_ms=true",
            "telemetry.interval_ms: must be an integer number of milliseconds, at least 10; got True",
        ),
        ("telemetry.rate=1", "telemetry.rate: unknown key 'rate'; allowed under telemetry: enabled, interval_ms"),
        ("+telemetry.rate=1", "telemetry.rate: Extra inputs are not permitted"),
        ("telemetry.enabled=sometimes", "telemetry.enabled: got 'sometimes'; allowed: true, false"),
    ],
)
def test_bad_telemetry_settings_are_one_line_errors(override, message):
    with pytest.raises(ConfigError) as info:
        load_point([*DEBUG, override])
    assert info.value.lines == [message]


def test_bad_telemetry_settings_exit_2_before_anything_launches(tmp_path):
    code, _, err, _ = in_process("run", *DEBUG, "telemetry.interval_ms=9", f"results_dir={tmp_path}")
    assert code == 2
    assert err == "error: telemetry.interval_ms: must be an integer number of milliseconds, at least 10; got 9\n"
    assert not any(tmp_path.iterdir())


def test_telemetry_observes_and_leaves_the_point_id_as_it_is():
    plain = load_point(DEBUG).spec
    off = load_point([*DEBUG, "telemetry.enabled=false", "telemetry.interval_ms=250"]).spec
    assert (off.telemetry.enabled, off.telemetry.interval_ms) == (False, 250)
    assert (plain.telemetry.enabled, plain.telemetry.interval_ms) == (True, 100)
    assert off.point_id == plain.point_id and "telemetry" not in plain.identity()


def test_the_worker_samples_only_when_telemetry_is_enabled():
    import torch

    from fsdp_core.train import telemetry_sampler

    on = load_point([*DEBUG, "telemetry.interval_ms=20"]).spec
    off = load_point([*DEBUG, "telemetry.enabled=false"]).spec
    sampler = telemetry_sampler(on.telemetry, torch.device("cpu"), rank=0)
    assert (sampler.interval_ms, sampler.meta["rank"]) == (20, 0)
    assert telemetry_sampler(off.telemetry, torch.device("cpu"), rank=0) is None


def test_a_new_launch_clears_a_stale_series(tmp_path):
    from bench.run.execute import prepare_launch
    from bench.schema.protocol import TELEMETRY_SIDECARS

    spec = load_point(DEBUG).spec
    folder = tmp_path / spec.sweep.name / spec.point_id
    folder.mkdir(parents=True)
    for name in TELEMETRY_SIDECARS:
        (folder / name).write_text("from an earlier run")
    prepare_launch([spec], tmp_path)
    assert [p.name for p in folder.iterdir()] == []


def _telemetry(energy_per_token: float | None, util: float) -> Telemetry:
    missing = {} if energy_per_token is not None else {"energy_per_token_j": "no RAPL"}
    return Telemetry(
        window_s=1.0, ranks=1, samples=10, util_pct=util, energy_per_token_j=energy_per_token, missing=missing
    )


def _side(energies: list[float | None], utils: list[float]) -> list:
    records = []
    for repeat, (energy, util) in enumerate(zip(energies, utils)):
        record = make_record(step_times(0.05, 0.02, 20, seed=repeat), spec={"repeat": repeat})
        record.metrics.telemetry = _telemetry(energy, util)
        records.append(record)
    return points_from_records(records)


def _finding(report, metric):
    return next(f for f in report.findings if f.metric == metric)


def test_energy_per_token_regression_is_judged_on_one_value_per_run():
    base = _side([0.100, 0.102, 0.098, 0.101, 0.099], [90, 91, 89, 90, 92])
    worse = _side([0.125, 0.127, 0.123, 0.126, 0.124], [70, 71, 69, 70, 72])
    assert base[0].run_values["energy_per_token"] == [0.100, 0.102, 0.098, 0.101, 0.099]
    report = compare(base, worse)
    energy, util = _finding(report, "energy_per_token"), _finding(report, "utilization")
    assert (energy.kind, energy.verdict, energy.baseline, energy.current) == ("timing", "regression", 0.100, 0.125)
    assert energy.change == pytest.approx(0.25)
    assert "n=5/5" in energy.confidence  # one sample per run
    assert (util.verdict, util.change) == ("regression", pytest.approx(70 / 90 - 1))
    same = compare(base, _side([0.101, 0.099, 0.100, 0.102, 0.098], [90, 90, 91, 89, 92]))
    assert _finding(same, "energy_per_token").verdict == "ok"


def test_few_runs_cannot_gate_a_run_level_metric():
    report = compare(_side([0.1, 0.1], [90, 90]), _side([0.2, 0.2], [50, 50]))
    energy = _finding(report, "energy_per_token")
    assert (energy.verdict, energy.gating, energy.confidence) == ("insufficient", False, "n=2/2 < 3")
    assert report.exit_code == 0


def test_a_side_without_energy_reports_it_missing_without_failing():
    report = compare(_side([0.1, 0.1, 0.1], [90] * 3), _side([None, None, None], [90] * 3))
    energy = _finding(report, "energy_per_token")
    assert (energy.verdict, energy.gating) == ("missing", False)
    assert report.exit_code == 0


def test_thresholds_of_the_telemetry_metrics():
    (energy,) = parse_threshold("energy_per_token:+5%")
    assert (energy.metric, energy.pct) == ("energy_per_token", 5.0)
    with pytest.raises(
        ThresholdError, match=r"energy_per_token is lower-is-better, so its threshold is written energy_per_token:\+3%"
    ):
        parse_threshold("energy_per_token:-3%")
    assert "energy_per_token:+5%, utilization:-5%" in Thresholds().describe()


def test_ab_gives_each_side_its_own_overrides(tmp_path):
    echo = [sys.executable, "-c", "import sys; print(' '.join(sys.argv[1:]))"]
    outcomes = run_rounds(
        {"A": echo, "B": echo}, [["model=debug"]], 1, tmp_path, timeout_s=60, progress=lambda _: None,
        side_overrides={"A": [], "B": ["telemetry.enabled=false"]},
    )  # fmt: skip
    logs = {o.side: open(o.log).read().splitlines()[-1] for o in outcomes}
    assert logs["A"] == f"run model=debug results_dir={tmp_path / 'A' / 'round00'}"
    assert logs["B"] == f"run model=debug telemetry.enabled=false results_dir={tmp_path / 'B' / 'round00'}"


def test_ab_refuses_side_overrides_that_change_the_point(tmp_path):
    run = in_process("ab", "--b-overrides", "train.seq_len=16", "-o", tmp_path / "ab", *DEBUG)
    assert run.rc == 2
    assert run.stderr.startswith("error: --b-overrides: train.seq_len=16 changes what the point measures")
    run = in_process("ab", "--a-overrides", "telemetry.interval_ms=1", "-o", tmp_path / "ab", *DEBUG)
    assert run.rc == 2
    assert "error: --a-overrides: telemetry.interval_ms: must be an integer" in run.stderr
    assert not (tmp_path / "ab").exists()
