"""Outputs of `check`: the table, JUnit XML, markdown summary, and baseline files."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from bench.analysis.check.baseline import BaselineError, Side, load_side, parse_baseline, save_baseline
from bench.analysis.check.compare import compare
from bench.analysis.check.points import points_from_records
from bench.analysis.check.synthetic import SYNTHETIC_ENV, make_record, step_times
from bench.analysis.check.thresholds import Thresholds
from bench.analysis.records import write_record
from reports.check.junit import build_junit, write_junit
from reports.check.summary import markdown_summary
from reports.check.table import format_value, hidden_line, report_rows, text_table, verdict_line


@pytest.fixture
def regressed_report():
    base = [make_record(step_times(0.05, 0.02, 30, seed=1))]
    cur = [
        make_record(
            step_times(0.05, 0.02, 30, seed=2),
            comm={"all_gather": 2_000_000, "reduce_scatter": 500_000, "all_reduce": 0},
        )
    ]
    base.append(make_record(step_times(0.05, 0.02, 30, seed=3), spec={"nodes": 2}))
    return compare(points_from_records(base), points_from_records(cur), Thresholds())


def test_junit_xml_parses_with_one_failure_per_regression(regressed_report, tmp_path):
    path = tmp_path / "out" / "check.xml"
    write_junit(regressed_report, path)
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert root.tag == "testsuites"
    cases = suite.findall("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["comm_bytes_per_step.all_gather"]
    assert failures[0].find("failure").get("type") == "regression"
    assert suite.get("failures") == "1"
    assert int(suite.get("tests")) == len(cases) == len(regressed_report.findings) + 1
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert skipped[-1].find("skipped").get("message") == "in the baseline but not in the current results"


def test_junit_passing_case_carries_numbers(regressed_report):
    tree = build_junit(regressed_report)
    params = [c for c in tree.getroot().iter("testcase") if c.get("name") == "params"][0]
    assert params.find("system-out").text.startswith("baseline=")
    assert "verdict=ok" in params.find("system-out").text


def test_table_and_summary_show_the_regression_first(regressed_report):
    rows = report_rows(regressed_report)
    assert rows[0][1:6] == ["comm_bytes_per_step.all_gather", "1,000,000", "2,000,000", "+100.00%", "REGRESSION"]
    table = text_table(rows)
    assert table.splitlines()[0].split() == [
        "point",
        "metric",
        "baseline",
        "current",
        "change",
        "verdict",
        "confidence",
    ]
    summary = markdown_summary(regressed_report, baseline="b.json", current="results")
    assert summary.startswith("## fsdp-bench check: FAIL: 1 regression(s) (1 point(s) compared")
    assert "| point | metric | baseline | current | change | verdict | confidence |" in summary
    assert "Baseline points not in the current results: debug 2x1" in summary
    assert verdict_line(regressed_report).endswith("1 baseline point(s) not run, 0 new)")


def test_compact_rows_leave_out_unchanged_counters(regressed_report):
    compact = report_rows(regressed_report, compact=True)
    assert [row[1] for row in compact] == ["comm_bytes_per_step.all_gather", "tokens_per_s", "step_time_s"]
    assert hidden_line(regressed_report) == "4 counter(s) identical to the baseline (not listed)"
    assert len(report_rows(regressed_report)) == 7


def test_format_value():
    assert format_value("comm_bytes_per_step.all_gather", 1234567) == "1,234,567"
    assert format_value("tokens_per_s", 12345.678) == "12,345.7"
    assert format_value("step_time_s", 0.0123456) == "0.01235"
    assert format_value("mfu", None) == "-"


def test_baseline_round_trip(tmp_path):
    records = [make_record(step_times(0.05, 0.02, 12, seed=r), spec={"repeat": r}) for r in range(2)]
    points = points_from_records(records)
    doc = save_baseline(Side(points, dict(SYNTHETIC_ENV), source="x"), tmp_path / "b.json")
    assert doc["schema_version"] == 2 and doc["env"] == SYNTHETIC_ENV
    loaded = load_side(tmp_path / "b.json")
    assert loaded.kind == "baseline"
    (point,) = loaded.points
    assert point.key == points[0].key
    assert point.counters == points[0].counters
    assert point.step_runs == points[0].step_runs
    assert point.tokens_per_step == points[0].tokens_per_step
    assert point.runs == 2
    assert compare(loaded.points, points, Thresholds()).exit_code == 0


def test_results_folder_side_reads_records_and_reports_bad_files(tmp_path):
    record = make_record(step_times(0.05, 0.02, 12, seed=1))
    write_record(record, tmp_path / "adhoc" / record.point_id / "result.json")
    (tmp_path / "adhoc" / "broken").mkdir()
    (tmp_path / "adhoc" / "broken" / "result.json").write_text("{")
    side = load_side(tmp_path)
    assert side.kind == "results" and side.env == {**SYNTHETIC_ENV, "cuda": None, "nccl": None}
    assert len(side.points) == 1
    assert len(side.problems) == 1 and "unreadable JSON" in side.problems[0]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "other"}, "not an fsdp-bench baseline"),
        (
            {"kind": "fsdp-bench-baseline", "schema_version": 7},
            "schema_version 7 is unknown to this fsdp-bench (it reads versions up to 2); upgrade fsdp-bench",
        ),
        (
            {"kind": "fsdp-bench-baseline", "schema_version": 2, "points": [{"counters": {}}]},
            "points.0.identity: Field required",
        ),
    ],
)
def test_invalid_baselines_are_named(doc, message, tmp_path):
    with pytest.raises(BaselineError, match=re.escape(message)):
        parse_baseline(doc, "b.json")
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match="b.json"):
        load_side(path)


def test_missing_path_is_named(tmp_path):
    with pytest.raises(BaselineError, match="no such file or folder"):
        load_side(tmp_path / "nope")


def test_a_store_is_a_side_too(tmp_path):
    from bench.analysis.store import SQLiteStore

    records = [make_record(step_times(0.05, 0.02, 12, seed=r), spec={"nodes": n}) for r, n in ((1, 1), (2, 2))]
    store = SQLiteStore(tmp_path / "results.sqlite")
    store.ingest(records)
    side = load_side(tmp_path / "results.sqlite")
    assert side.kind == "results" and side.source.endswith("results.sqlite")
    assert sorted(p.label.split()[1] for p in side.points) == ["1x1", "2x1"]
    assert compare(side.points, points_from_records(records), Thresholds()).exit_code == 0
