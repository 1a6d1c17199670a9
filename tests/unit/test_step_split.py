"""The profiled step's split (fsdp_core/step_split.py) on committed, trimmed traces (tests/fixtures/traces):
two gloo ranks of `debug` full_shard, clean and with debug.comm_delay_ms=20 (rank 1 late), and a real
CUDA trace with NCCL kernels from Holistic Trace Analysis's test data, against HTA's own overlap figure.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bench.analysis.records import load_records
from bench.schema.breakdown import StepBreakdown, breakdown_of
from bench.schema.metrics import get
from fsdp_core.step_split import (
    PROFILER_STEP,
    collective_kind,
    cut_at_step,
    intersect,
    merged,
    rank_medians,
    split_trace,
    subtract,
)
from reports.console import point_summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRACES = FIXTURES / "traces"
DELAY_S, CALLS = 0.020, 8  # debug.comm_delay_ms=20; debug full_shard: 5 all-gathers + 3 reduce-scatters a step


def trace(name: str) -> dict:
    return json.loads(gzip.decompress((TRACES / f"{name}.json.gz").read_bytes()))


@pytest.fixture(scope="module")
def medians() -> dict[str, dict]:
    return {f"{run}/{r}": rank_medians(split_trace(trace(f"debug_{run}_rank{r}"))) for run in ("clean", "comm_delay")
            for r in (0, 1)}  # fmt: skip


def test_interval_arithmetic():
    assert merged([(3, 4), (0, 2), (1, 3), (6, 6)]) == [(0, 4)]
    assert intersect([(0, 4), (6, 9)], [(2, 7)]) == [(2, 4), (6, 7)]
    assert subtract([(0, 10)], [(1, 2), (4, 5), (9, 12)]) == [(0, 1), (2, 4), (5, 9)]
    assert subtract([(0, 1), (3, 4)], []) == [(0, 1), (3, 4)]


def test_collective_kinds_come_from_c10d_calls_and_nccl_kernel_names():
    assert collective_kind("c10d::_allgather_base_") == "all_gather"
    assert collective_kind("c10d::_reduce_scatter_base_") == "reduce_scatter"
    assert collective_kind("c10d::allreduce_") == "all_reduce"
    assert collective_kind("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == (
        "reduce_scatter"
    )
    assert collective_kind("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)") == (
        "all_gather"
    )
    assert collective_kind("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)") == "other"


def test_every_step_adds_up_and_no_part_is_negative():
    for run in ("clean", "comm_delay"):
        for rank in (0, 1):
            split = split_trace(trace(f"debug_{run}_rank{rank}"))
            assert split["device"] == "cpu" and len(split["steps"]) == 3 and split["missing"] == {}
            for step in split["steps"]:
                parts = ("compute_s", "comm_s", "exposed_comm_s", "idle_s", "fsdp_s", "barrier_s")
                assert all(step[p] >= 0 for p in parts)
                assert step["compute_s"] + step["exposed_comm_s"] + step["idle_s"] == pytest.approx(step["step_s"])
                assert step["overlapped_comm_s"] + step["exposed_comm_s"] == pytest.approx(step["comm_s"])
                assert step["fsdp_s"] + step["barrier_s"] <= step["idle_s"] + 1e-9
                # FSDP2 issues its collectives synchronously on CPU: nothing overlaps.
                assert step["overlapped_comm_s"] == 0.0
                # One call per collective, its kind from the c10d call: gloo runs a reduce-scatter
                # as gloo:all_reduce, yet none is counted as an all-reduce.
                assert step["calls"] == {"all_gather": 5, "reduce_scatter": 3}
                assert set(step["comm_s_by_kind"]) == {"all_gather", "reduce_scatter"}
    names = {e["name"] for e in trace("debug_clean_rank0")["traceEvents"]}
    assert {"gloo:all_reduce", "c10d::_reduce_scatter_base_"} <= names and "c10d::allreduce_" not in names


def test_a_late_peer_shows_as_the_others_communication_and_the_late_ranks_idle(medians):
    """rank 1 enters each collective 20 ms late: rank 0 waits inside the collectives (communication,
    all of it exposed, grows by calls x delay within 10 %), rank 1 waits in FSDP's ranges (idle, FSDP's
    part, grows by as much) and its own communication does not grow."""
    expected = CALLS * DELAY_S
    clean0, late0, clean1, late1 = (medians[k] for k in ("clean/0", "comm_delay/0", "clean/1", "comm_delay/1"))
    for part in ("comm_s", "exposed_comm_s"):
        assert late0[part] - clean0[part] == pytest.approx(expected, rel=0.10)
    assert late1["idle_s"] - clean1["idle_s"] == pytest.approx(expected, rel=0.10)
    assert late1["fsdp_s"] - clean1["fsdp_s"] == pytest.approx(expected, rel=0.10)
    assert late1["comm_s"] - clean1["comm_s"] < 0.1 * expected
    assert abs(late0["compute_s"] - clean0["compute_s"]) < 0.1 * expected


def test_the_cuda_split_agrees_with_holistic_trace_analysis():
    """HTA 0.5.0 on the untrimmed trace (rank 0 of 2, A100, NCCL 2.17.1; it drops the last profiler step
    and counts memcpy/memset kernels as memory, not compute):

        from hta.trace_analysis import TraceAnalysis
        TraceAnalysis(trace_dir="tests/data/nccl_parser_config").get_comm_comp_overlap(visualize=False)
        # rank 0: comp_comm_overlap_pctg 14.31

    The harness's overlapped / communication over the same two steps is within 5 points of it."""
    split = split_trace(trace("hta_nccl_data"), PROFILER_STEP)
    assert split["device"] == "cuda" and len(split["steps"]) == 2 and set(split["missing"]) == {"fsdp_s", "barrier_s"}
    overlapped = sum(s["overlapped_comm_s"] for s in split["steps"])
    comm = sum(s["comm_s"] for s in split["steps"])
    assert 100 * overlapped / comm == pytest.approx(14.31, abs=5.0)
    for step in split["steps"]:
        assert step["calls"] == {"all_reduce": 5, "other": 2}  # 5 AllReduce and 2 Broadcast kernels a step
        assert step["compute_s"] + step["exposed_comm_s"] + step["idle_s"] == pytest.approx(step["step_s"])
        assert step["fsdp_s"] is None and step["barrier_s"] is None


def test_a_trace_over_the_cap_is_cut_at_a_whole_step():
    whole = trace("debug_clean_rank0")
    size = len(json.dumps(whole))
    assert cut_at_step(whole, size, size) == (whole, None)
    cut, kept = cut_at_step(whole, size, size * 0.75)
    assert kept == 2 and len(split_trace(cut)["steps"]) == 2
    assert split_trace(cut)["steps"] == split_trace(whole)["steps"][:2]
    cut, kept = cut_at_step(whole, size, 10)  # never less than one step
    assert kept == 1 and len(split_trace(cut)["steps"]) == 1


def test_the_record_section_is_the_median_over_ranks(medians):
    ranks = [{**medians[f"clean/{r}"], "device": "cpu", "trace": f"trace_rank{r}.json.gz"} for r in (0, 1)]
    section = breakdown_of(ranks, steps=3)
    assert isinstance(section, StepBreakdown) and section.traces == ["trace_rank0.json.gz", "trace_rank1.json.gz"]
    assert section.compute_s == pytest.approx((medians["clean/0"]["compute_s"] + medians["clean/1"]["compute_s"]) / 2)
    assert section.exposed_comm_share == pytest.approx(section.exposed_comm_s / section.step_s)
    assert section.calls_per_step == {"all_gather": 5, "reduce_scatter": 3}
    assert section.idle_s_per_rank == [medians["clean/0"]["idle_s"], medians["clean/1"]["idle_s"]]


def test_a_version_4_record_carries_its_split_and_every_view_reads_it():
    """The real version-4 record of tests/fixtures/records/v4 (the same run as the clean traces): the
    step range agrees with the step timer's time of the same profiled steps within 5 %, the catalogue
    reads its parts and the console prints the split's line."""
    (record,), problems = load_records(FIXTURES / "records" / "v4")
    b = record.metrics.step_breakdown
    assert not problems and record.schema_version == 4 and record.spec.profile.enabled and b.steps == 3
    assert b.step_s == pytest.approx(b.timer_step_s, rel=0.05)
    assert b.traces == ["trace_rank0.json.gz", "trace_rank1.json.gz"] and b.calls_per_step["all_gather"] == 5
    assert get("exposed_comm_share").value(record) == pytest.approx(b.exposed_comm_s / b.step_s)
    assert get("idle_s").value(record) == b.idle_s and get("compute_s").value(record) == b.compute_s
    line = next(line for line in point_summary(record).splitlines() if "step split:" in line)
    assert f"exposed share {100 * b.exposed_comm_share:.1f}%" in line and "over 3 profiled steps" in line


def test_a_new_launch_of_the_point_deletes_its_old_traces_with_the_old_record(tmp_path):
    from bench.config.compose import spec_from_fields
    from bench.run.execute import prepare_launch

    spec = spec_from_fields(model="debug", gpus_per_node=2, **{"sweep.name": "unit", "profile.enabled": True})
    point = tmp_path / "unit" / spec.point_id
    point.mkdir(parents=True)
    for name in ("result.json", "trace_rank0.json.gz", "trace_rank1.json.gz", "notes.txt"):
        (point / name).write_text("old")
    prepare_launch([spec], tmp_path)
    assert sorted(p.name for p in point.iterdir()) == ["notes.txt"]


def test_the_report_shows_where_the_step_went_beside_the_prediction(tmp_path):
    """The real profiled, planned 1-2 node series of tests/fixtures/records/v4_split: summary.md has a
    line per point (measured split by collective and idle part, the planner's beside it), and the
    figure stacks each node count's parts with the ideal step dashed."""
    from bench.analysis.report.aggregate import build_cells, build_scaling
    from bench.analysis.report.frame import records_to_frame
    from reports.report.build import write_report
    from reports.report.plots import where_efficiency_went_figure

    (one, two), problems = load_records(FIXTURES / "records" / "v4_split")
    assert not problems
    write_report([one, two], tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "## Where the step went (profiled points)" in summary
    b = max((one, two), key=lambda r: r.spec.nodes).metrics.step_breakdown
    share = b.exposed_comm_s_by_kind["all_gather"] / b.step_s
    section = summary.split("## Where the step went (profiled points)")[1]
    line = next(line for line in section.splitlines() if line.startswith("| split | ") and "| 2 |" in line)
    assert f"(all_gather {100 * share:.0f} %, reduce_scatter" in line and "idle " in line and "(FSDP " in line
    assert "exposed comm + interference" in line  # the planner's split: the sweep planned
    assert (tmp_path / "report" / "where_efficiency_went.png").stat().st_size > 0
    scaling = build_scaling(build_cells(records_to_frame([one, two])))
    fig = where_efficiency_went_figure(scaling)
    (ax,) = fig.axes
    gids = {patch.get_gid() for patch in ax.patches}
    assert {"split:compute", "split:exposed all_gather", "split:exposed reduce_scatter", "split:idle: FSDP",
            "split:predicted: compute", "split:predicted: exposed comm + interference"} <= gids  # fmt: skip
    (ideal,) = [line for line in ax.get_lines() if line.get_gid() == "ideal:step"]
    base = min((one, two), key=lambda r: r.spec.nodes).metrics.step_breakdown.step_s
    assert list(ideal.get_ydata()) == pytest.approx([base * 1e3] * 2)  # weak scaling: the baseline's step


def test_plan_accuracy_puts_the_measured_split_beside_the_predicted_one():
    from bench.analysis.plan_accuracy import compare_records, markdown

    records, _ = load_records(FIXTURES / "records" / "v4_split")
    rows = compare_records(records)
    two = next(r for r in rows if r["point"].startswith("debug 2x1"))
    b = two["measured_split"]
    assert b is not None and 0 < two["predicted_exposed_share"] < 1
    line = next(line for line in markdown(rows).splitlines() if line.startswith("| debug 2x1"))
    assert f"{b.compute_s:.3f} / {b.exposed_comm_s:.3f} / {b.idle_s:.3f}" in line
    assert f"/ {100 * b.exposed_comm_share:.0f}% |" in line


def test_the_sweep_prints_each_profiled_points_split_after_its_table():
    from reports.report.breakdown import record_lines

    records, _ = load_records(FIXTURES / "records" / "v4_split")
    lines = record_lines(records)
    assert lines[0] == "where the step went (profiled steps, shares of the step):" and len(lines) == 3
    two = max(records, key=lambda r: r.spec.nodes)
    (line,) = [line for line in lines if two.point_id in line]
    assert f"exposed comm {100 * two.metrics.step_breakdown.exposed_comm_share:.0f} % (all_gather" in line
    assert record_lines(load_records(FIXTURES / "records" / "v3")[0]) == []  # never profiled: nothing printed
