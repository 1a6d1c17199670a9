"""Matching, counters, statuses and repeats in `check` (bench.analysis.check.points/compare/fingerprint)."""

from __future__ import annotations

import pytest

from bench.analysis.check import fingerprint
from bench.analysis.check.compare import compare
from bench.analysis.check.points import points_from_records
from bench.analysis.check.synthetic import SYNTHETIC_ENV, make_record, step_times
from bench.analysis.check.thresholds import Thresholds


def _records(seed: int, scale: float = 1.0, repeats: int = 2, **kwargs):
    """Two synthetic points (1 and 2 nodes), `repeats` runs of 20 steps each (timings gate from 2 runs)."""
    return [
        make_record(
            step_times(median * scale, 0.02, 20, seed=seed + 100 * nodes + 10 * r),
            spec={"nodes": nodes, "repeat": r},
            **kwargs,
        )
        for nodes, median in ((1, 0.05), (2, 0.08))
        for r in range(repeats)
    ]


def _check(base_records, cur_records, **kwargs):
    return compare(points_from_records(base_records), points_from_records(cur_records), Thresholds(), **kwargs)


def test_same_distribution_passes_with_every_metric_ok():
    report = _check(_records(1), _records(2))
    assert report.exit_code == 0
    assert report.matched == 2
    verdicts = {(f.point.split()[1], f.metric): f.verdict for f in report.findings}
    assert verdicts[("1x1", "comm_bytes_per_step.all_gather")] == "ok"
    assert verdicts[("2x1", "params")] == "ok"
    assert verdicts[("1x1", "tokens_per_s")] == "ok"
    assert "peak_mem_bytes" not in {f.metric for f in report.findings}  # CPU: max RSS is not deterministic


def test_changed_counter_fails():
    more = {"all_gather": 1_000_001, "reduce_scatter": 500_000, "all_reduce": 0}
    report = _check(_records(1), _records(2, comm=more))
    assert report.exit_code == 1
    failing = [(f.metric, f.baseline, f.current) for f in report.regressions]
    assert failing == [("comm_bytes_per_step.all_gather", 1_000_000, 1_000_001)] * 2


def test_fewer_bytes_is_reported_as_improved_and_passes():
    fewer = {"all_gather": 900_000, "reduce_scatter": 500_000, "all_reduce": 0}
    report = _check(_records(1), _records(2, comm=fewer))
    assert report.exit_code == 0
    changed = [f for f in report.findings if f.metric == "comm_bytes_per_step.all_gather"]
    assert [f.verdict for f in changed] == ["improved", "improved"]
    assert changed[0].change == pytest.approx(-0.1)


def test_counter_threshold_allows_a_small_rise():
    more = {"all_gather": 1_005_000, "reduce_scatter": 500_000, "all_reduce": 0}
    base, cur = points_from_records(_records(1)), points_from_records(_records(2, comm=more))
    assert compare(base, cur, Thresholds.parse(["comm_bytes_per_step:+1%"])).exit_code == 0
    assert compare(base, cur, Thresholds()).exit_code == 1


def test_slower_timings_fail_unless_timings_are_not_gating():
    base, cur = _records(1), _records(2, scale=1.25)
    assert _check(base, cur).exit_code == 1
    report = _check(base, cur, gate_timings=False)
    assert report.exit_code == 0
    tps = [f for f in report.findings if f.metric == "tokens_per_s"]
    assert [f.verdict for f in tps] == ["regression", "regression"]
    assert not any(f.gating for f in tps)


def test_one_run_per_side_is_insufficient_unless_min_runs_is_1():
    base, cur = _records(1, repeats=1), _records(2, scale=1.25, repeats=1)  # a 20% tokens/s drop
    report = _check(base, cur)
    assert report.exit_code == 0
    tps = [f for f in report.findings if f.metric == "tokens_per_s"]
    assert [(f.verdict, f.gating) for f in tps] == [("insufficient", False)] * 2
    assert tps[0].change == pytest.approx(-0.2, abs=0.02)
    assert tps[0].confidence.startswith("runs=1/1 < 2; p=")
    assert report.hints == [
        "1 run per side: per-step samples miss run-to-run noise; use sweep.repeats>=2 or fsdp-bench ab"
    ]
    opted_in = _check(base, cur, min_runs=1)
    assert opted_in.exit_code == 1
    assert sorted(f.metric for f in opted_in.regressions) == ["step_time_s"] * 2 + ["tokens_per_s"] * 2
    assert opted_in.hints == []


def test_counters_still_gate_with_one_run_per_side():
    more = {"all_gather": 1_000_001, "reduce_scatter": 500_000, "all_reduce": 0}
    report = _check(_records(1, repeats=1), _records(2, repeats=1, comm=more))
    assert report.exit_code == 1
    assert [f.metric for f in report.regressions] == ["comm_bytes_per_step.all_gather"] * 2


def test_one_run_on_one_side_only_is_insufficient_too():
    report = _check(_records(1, repeats=3), _records(2, scale=1.25, repeats=1))
    tps = [f for f in report.findings if f.metric == "tokens_per_s"]
    assert [f.verdict for f in tps] == ["insufficient"] * 2
    assert tps[0].confidence.startswith("runs=3/1 < 2")
    assert report.hints[0].startswith("fewer than 2 runs on a side: per-step samples miss")
    assert report.exit_code == 0


def test_point_that_now_fails_is_a_regression():
    cur = [_records(2)[0], make_record([], spec={"nodes": 2}, status="oom")]
    report = _check(_records(1), cur)
    assert report.exit_code == 1
    assert [(f.metric, f.baseline, f.current) for f in report.regressions] == [("status", "ok", "oom")]


def test_point_skipped_or_interrupted_now_is_listed_as_not_run():
    cur = [_records(2)[0], make_record([], spec={"nodes": 2}, status="skipped")]
    report = _check(_records(1), cur)
    assert report.exit_code == 0
    assert [label.split()[1] for label in report.only_in_baseline] == ["2x1"]
    assert report.matched == 1


def test_nothing_comparable_exits_2():
    base = [make_record(step_times(0.05, 0.02, 20, seed=1), spec={"strategy": "no_shard"})]
    report = _check(base, _records(2))
    assert report.exit_code == 2
    assert report.matched == 0
    assert len(report.only_in_baseline) == 1 and len(report.only_in_current) == 2


def test_repeats_are_pooled_and_slowdown_knob_still_matches():
    repeats = [make_record(step_times(0.05, 0.02, 10, seed=r), spec={"repeat": r}) for r in range(3)]
    (point,) = points_from_records(repeats)
    assert point.runs == 3
    assert [len(run) for run in point.step_runs] == [10, 10, 10]
    slowed = [make_record(step_times(0.05, 0.02, 10, seed=9), spec={"debug": {"slow_fraction": 0.1}})]
    assert points_from_records(slowed)[0].key == point.key
    other = [make_record(step_times(0.05, 0.02, 10, seed=9), spec={"seq_len": 32})]
    assert points_from_records(other)[0].key != point.key


def test_peak_memory_is_a_counter_on_cuda_only():
    from bench.schema.record import PeakMemory

    def with_memory(record, peak: int, device: str):
        cluster = record.spec.cluster.model_copy(update={"device_type": device})
        spec = record.spec.model_copy(update={"cluster": cluster})
        metrics = record.metrics.model_copy(update={"peak_mem_bytes": PeakMemory(max=peak, per_rank=[peak])})
        return record.model_copy(update={"spec": spec, "metrics": metrics})

    base = make_record(step_times(0.05, 0.02, 20, seed=1))
    cur = make_record(step_times(0.05, 0.02, 20, seed=2))
    cpu = _check([with_memory(base, 100, "cpu")], [with_memory(cur, 200, "cpu")])
    assert cpu.exit_code == 0
    gpu = _check([with_memory(base, 100, "cuda")], [with_memory(cur, 101, "cuda")])
    assert [(f.metric, f.verdict) for f in gpu.regressions] == [("peak_mem_bytes", "regression")]


def test_mfu_follows_tokens_per_s():
    from bench.analysis.check.timings import compare_timing_metric

    record = make_record([0.1, 0.2, 0.1, 0.1], mfu=0.3)
    (point,) = points_from_records([record])
    slower = make_record([0.2, 0.4, 0.2, 0.2], mfu=0.15)
    (half,) = points_from_records([slower])
    mfu = compare_timing_metric(point, half, "mfu")
    # MFU is tokens/s times a constant: half the tokens/s is half the MFU.
    assert (mfu.baseline, mfu.current, mfu.ratio) == pytest.approx((0.3, 0.15, 0.5))


def test_mismatched_environment_is_refused_with_a_clear_message():
    base = points_from_records(_records(1))
    cur = points_from_records(_records(2, env={**SYNTHETIC_ENV, "torch": "2.1.0"}))
    decision = fingerprint.decide(base[0].fingerprint, cur[0].fingerprint, allow_change=False, gate_timings=True)
    assert decision.refused
    assert decision.lines[0] == "environment changed: torch: 2.0.0+synthetic -> 2.1.0"
    assert "pass --allow-env-change to compare anyway" in decision.lines[1]
    allowed = fingerprint.decide(base[0].fingerprint, cur[0].fingerprint, allow_change=True, gate_timings=True)
    assert not allowed.refused and "comparing anyway (--allow-env-change)" in allowed.lines[1]
    counters_only = fingerprint.decide(base[0].fingerprint, cur[0].fingerprint, allow_change=False, gate_timings=False)
    assert not counters_only.refused and "comparing counters only" in counters_only.lines[1]


def test_mixed_environments_in_one_side_are_reported():
    points = points_from_records(_records(1) + [make_record([0.1] * 5, spec={"nodes": 4}, env={"torch": "9"})])
    with pytest.raises(ValueError, match="more than one environment"):
        fingerprint.common_fingerprint(points)


def test_fields_added_later_leave_keys_of_points_at_their_default_unchanged():
    from typing import Annotated

    from pydantic import Field

    from bench.analysis.check.points import identity_key, match_identity
    from bench.schema.identity import IN, LATER
    from bench.schema.spec import CompileBackend, RunSpec, TrainSpec

    # Declaring a field as added after schema version 2 drops it from identities at its default.
    class LaterBackend(TrainSpec):
        compile_backend: Annotated[CompileBackend, LATER] = "inductor"

    class LaterSpec(RunSpec):
        train: Annotated[LaterBackend, IN] = Field(default_factory=LaterBackend)

    record_spec = make_record([0.1] * 3).spec
    before = identity_key(match_identity(record_spec))
    spec = LaterSpec.model_validate(record_spec.model_dump())
    assert "compile_backend" in match_identity(record_spec)["train"]
    assert "compile_backend" not in match_identity(spec)["train"]
    aot = spec.model_copy(update={"train": spec.train.model_copy(update={"compile_backend": "aot_eager"})})
    assert match_identity(aot)["train"]["compile_backend"] == "aot_eager"
    assert identity_key(match_identity(aot)) != before


def test_every_field_added_later_is_absent_from_an_identity_at_its_default():
    """The real LATER_FIELDS list: a point that leaves them at their defaults keeps the identity
    (hence the point id and check's match) it had before they existed."""
    from bench.analysis.check.points import match_identity
    from bench.schema.spec import LATER_FIELDS

    identity = match_identity(make_record([0.1] * 3).spec)
    assert [(section, name) for section, name in LATER_FIELDS if name in identity.get(section, {})] == []


@pytest.mark.parametrize("knob", [{"slow_fraction": 0.1}, {"slow_rank": 0}])
def test_a_slowed_run_is_compared_with_its_clean_baseline(knob):
    from bench.analysis.check.points import identity_key, match_identity

    clean, slowed = make_record([0.1] * 3), make_record([0.1] * 3, spec={"debug": knob})
    assert slowed.point_id != clean.point_id  # a different point to the ledger ...
    assert identity_key(match_identity(slowed.spec)) == identity_key(match_identity(clean.spec))  # ... one to check
