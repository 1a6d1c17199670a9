"""The metric catalogue (bench/schema/metrics.py) is the one definition every metric list reads.

- every path names a field of the record schema, and each name finds one metric;
- check's and history's lists, the frame's and the store's columns, the GPU table's columns and the
  console's lines are the catalogue's, with values read at its paths from real records;
- the user-typed names keep working: `check --threshold` names, their results.csv aliases;
- the page templates quote no threshold of their own.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from bench.analysis.check.points import record_counters, record_run_values
from bench.analysis.check.thresholds import COUNTERS, METRICS, STEP_TIMINGS, TIMINGS, parse_threshold
from bench.analysis.records import load_records
from bench.analysis.report.frame import COLUMNS, records_to_frame
from bench.analysis.store import STORE_SCHEMA_VERSION, SQLiteStore
from bench.schema.metrics import BY_NAME, CATALOGUE, find, get, shown_in
from bench.schema.record import SCHEMA_VERSION, RunResult
from reports.console import point_summary
from reports.report.flag_rules import flag_rules
from reports.report.html import TEMPLATES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"


@pytest.fixture(scope="module")
def telemetry_records() -> list[RunResult]:
    records, problems = load_records(FIXTURES / "telemetry")
    assert records and not problems
    return records


def _field_type(model: type[BaseModel], name: str):
    """The model class (or list item's model class) of a field, None for a plain value."""
    annotation = model.model_fields[name].annotation
    for arg in (annotation, *typing.get_args(annotation)):
        for inner in (arg, *typing.get_args(arg)):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


@pytest.mark.parametrize("metric", [m for m in CATALOGUE if m.path], ids=lambda m: m.name)
def test_every_path_names_a_field_of_the_record(metric):
    model: type[BaseModel] | None = RunResult
    for part in metric.path.split("."):
        assert model is not None and part in model.model_fields, f"{metric.name}: {metric.path}: no field {part!r}"
        model = _field_type(model, part)
    # A number, or a list that the metric counts.
    assert model is None or metric.reduce == ("count",), f"{metric.name}: {metric.path} ends at a section"


def test_each_name_finds_one_metric_and_the_flags_are_read_by_name():
    names = [name for metric in CATALOGUE for name in metric.names]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert find("energy_per_token") is find("energy_per_token_j") is get("energy_per_token")
    assert find("util_pct").name == "utilization" and find("step_time_median_s").name == "step_time_s"
    assert find("latency") is None
    assert get("throttle_fraction").flag("throttled") == 0.05


def test_check_and_history_list_the_catalogues_metrics_in_its_order():
    assert list(METRICS) == [m.name for m in shown_in("check")]
    assert TIMINGS == (
        "tokens_per_s", "step_time_s", "mfu", "energy_per_token", "utilization",
        "compute_s", "exposed_comm_s", "exposed_comm_share", "idle_s",
    )  # fmt: skip
    assert COUNTERS == (
        "comm_bytes_per_step.all_gather", "comm_bytes_per_step.reduce_scatter", "comm_bytes_per_step.all_reduce",
        "params", "flops_per_token", "peak_mem_bytes",
    )  # fmt: skip
    assert STEP_TIMINGS == ("tokens_per_s", "step_time_s", "mfu")


def test_a_results_csv_column_is_an_alias_check_accepts():
    (by_column,) = parse_threshold("energy_per_token_j:+3%")
    (by_name,) = parse_threshold("energy_per_token:+3%")
    assert (by_column.metric, by_column.pct) == (by_name.metric, by_name.pct) == ("energy_per_token", 3.0)
    assert [t.metric for t in parse_threshold("util_pct:-2%")] == ["utilization"]


def test_the_frame_has_every_catalogued_column_with_the_value_at_its_path(telemetry_records):
    frame = records_to_frame(telemetry_records).set_index("point_id")
    keys = [m.key for m in shown_in("frame")]
    assert set(keys) <= set(COLUMNS)
    for record in telemetry_records:
        row = frame.loc[record.point_id]
        assert row["energy_per_token_j"] != row["energy_per_token_j"]  # NaN: CPU without readable RAPL
        assert row["util_pct"] == pytest.approx(record.metrics.telemetry.util_pct)
        assert row["step_time_median_s"] == pytest.approx(record.metrics.step_time_s.median)
        assert row["peak_mem_bytes"] == record.metrics.peak_mem_bytes.max
        assert row["comm_all_gather_bytes"] == record.metrics.comm_bytes_per_step.all_gather


def test_check_reads_counters_and_run_values_at_the_catalogues_paths(telemetry_records):
    record = max(telemetry_records, key=lambda r: r.spec.nodes)
    counters = record_counters(record)
    assert counters["params"] == record.model_info.params == 156_480
    assert counters["comm_bytes_per_step.all_gather"] == record.metrics.comm_bytes_per_step.all_gather > 0
    assert "peak_mem_bytes" not in counters  # a CPU's peak RSS is not reproducible (exact_on: cuda)
    assert record_run_values(record) == {"utilization": record.metrics.telemetry.util_pct}  # no energy: no RAPL


def test_the_store_keeps_its_metric_columns_of_schema_5(tmp_path):
    """A metric added to the store's view changes its table: that needs a STORE_MIGRATIONS step and a
    new STORE_SCHEMA_VERSION (and this test's update with them)."""
    import sqlite3
    from contextlib import closing

    assert STORE_SCHEMA_VERSION == 5
    assert [m.key for m in shown_in("store")] == ["tokens_per_s", "tokens_per_s_per_device", "mfu", "peak_mem_bytes"]
    SQLiteStore(tmp_path / "store.db")
    with closing(sqlite3.connect(tmp_path / "store.db")) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(results)")]
    assert [c for c in columns if find(c)] == [m.key for m in shown_in("store")]


def test_a_checkpoint_bandwidth_leaves_zero_duration_saves_out_everywhere(telemetry_records):
    """One rule (bench.schema.checkpoint.write_bandwidth): the median over the saves that took time,
    stored where the record is made; the frame and the console read the stored value, and a run of
    zero-duration saves has none."""
    from bench.schema.checkpoint import CheckpointMetrics, CheckpointSave, write_bandwidth

    def saves(*durations: float) -> RunResult:
        save = [CheckpointSave(step=i, blocked_s=d, durable_s=d, bytes=1000, write_bytes_per_s=1000 / d if d else None)
                for i, d in enumerate(durations)]  # fmt: skip
        rate = write_bandwidth((s.bytes, s.durable_s) for s in save)  # as fsdp_core/checkpoint.py stores it
        checkpoint = CheckpointMetrics(mode="sync", every=1, dir="c", saves=save, write_bytes_per_s=rate)
        base = telemetry_records[0]
        return base.model_copy(update={"metrics": base.metrics.model_copy(update={"checkpoint": checkpoint})})

    write = get("ckpt_write_bytes_per_s")
    mixed = saves(0.0, 1.0, 4.0)
    assert write.value(mixed) == pytest.approx((1000 + 250) / 2)  # the median of 1000 and 250 B/s, the 0 left out
    assert records_to_frame([mixed])["ckpt_write_bytes_per_s"].iloc[0] == pytest.approx(625.0)
    assert "write 625 B/s" in point_summary(mixed)
    assert write.value(saves(0.0, 0.0)) is None and "write" not in point_summary(saves(0.0, 0.0))


def test_a_version_2_record_gets_the_stored_bandwidth_from_its_migration():
    """The real version-2 record of tests/fixtures/records/v2_checkpoint (three saves that took time)
    reads as today's version with the write bandwidth the ranks now store, by the same rule."""
    import json
    import statistics

    from bench.analysis.records import read_record

    path = next((FIXTURES / "v2_checkpoint").rglob("result.json"))
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 2 and "write_bytes_per_s" not in raw["metrics"]["checkpoint"]
    record = read_record(path)
    saves = raw["metrics"]["checkpoint"]["saves"]
    expected = statistics.median(s["bytes"] / s["durable_s"] for s in saves)
    assert record.schema_version == SCHEMA_VERSION and len(saves) == 3
    assert record.metrics.checkpoint.write_bytes_per_s == pytest.approx(expected)
    assert records_to_frame([record])["ckpt_write_bytes_per_s"].iloc[0] == pytest.approx(expected)


def test_a_version_3_record_stores_its_derived_values_and_every_view_shows_them():
    """The real version-3 record of tests/fixtures/records/v3 (fp16, three sync saves): the ranks stored
    the write bandwidth by the one rule and the scaler's skipped steps; the frame, the console and
    check read them as stored. Migrated to version 4, it has no step breakdown."""
    import json
    import statistics

    from bench.analysis.check.points import points_from_records

    (path,) = (FIXTURES / "v3").rglob("result.json")
    assert json.loads(path.read_text())["schema_version"] == 3
    (record,), problems = load_records(FIXTURES / "v3")
    assert not problems and record.schema_version == SCHEMA_VERSION and record.spec.precision == "fp16"
    # Read as today's version: the sections version 4 added are absent (null), not measured then.
    assert record.metrics.job is None and record.metrics.step_breakdown is None
    saves = record.metrics.checkpoint.saves
    assert len(saves) == 3 and all(s.durable_s > 0 for s in saves)
    stored = record.metrics.checkpoint.write_bytes_per_s
    assert stored == pytest.approx(statistics.median(s.bytes / s.durable_s for s in saves))
    assert record.metrics.scaler_skipped_steps == 0  # this run's fp16 gradients stayed finite
    row = records_to_frame([record]).iloc[0]
    assert (row["ckpt_write_bytes_per_s"], row["scaler_skipped_steps"]) == (pytest.approx(stored), 0)
    assert "numerics: skipped steps 0" in point_summary(record)
    (point,) = points_from_records([record])
    assert point.counters["params"] == record.model_info.params


def test_the_gpu_table_reads_the_catalogue_on_the_records_json(telemetry_records):
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check_table.py"
    spec = importlib.util.spec_from_file_location("gpu_check_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    record = telemetry_records[0]
    row = module.record_row("p", record.model_dump(mode="json"))
    assert row["util %"] == f"{record.metrics.telemetry.util_pct:.0f}"
    assert row["energy J/token"] == "-"  # no RAPL here
    assert set(row) == set(module.COLUMNS)


# Numbers followed by a percent sign (plain or after &nbsp;) are thresholds: each must come from the
# context. The <style> block is left out: CSS lengths (max-width: 100%) are layout, not a threshold.
PERCENT_LITERAL = re.compile(r"\d+(?:\.\d+)?\s*(?:&nbsp;)?%")
STYLE = re.compile(r"<style>.*?</style>", re.S)


@pytest.mark.parametrize("template", sorted(p.name for p in TEMPLATES.glob("*.j2")))
def test_no_template_writes_a_threshold_of_its_own(template):
    text = STYLE.sub("", (TEMPLATES / template).read_text())
    assert not PERCENT_LITERAL.findall(text), (
        f"{template}: write these from the context: {PERCENT_LITERAL.findall(text)}"
    )


def test_the_pages_quote_the_thresholds_the_code_applies():
    from bench.analysis.report.diagnosis import COMM_BOUND_SHARE, FLAG_POINTS
    from bench.schema.options import PreflightSettings
    from bench.schema.preflight import PreflightResult
    from reports.report.telemetry import THROTTLE_FLAG

    rules = flag_rules()
    assert (rules["throttled_pct"], rules["comm_bound_pct"], rules["below_prediction_points"]) == (
        f"{THROTTLE_FLAG * 100:g}",
        f"{COMM_BOUND_SHARE * 100:g}",
        f"{FLAG_POINTS:g}",
    )
    assert (rules["idle_util_pct"], rules["idle_share_pct"], rules["ci_pct"]) == ("10", "50", "95")
    assert rules["stragglers"] == [{"k": "3", "floor_pct": "10"}]
    # A preflight run with other straggler settings: the page names its rule beside the default.
    preflight = PreflightResult.model_construct(
        status="ok", settings=PreflightSettings(straggler_k=4, straggler_floor=0.2)
    )
    assert flag_rules([preflight])["stragglers"] == [{"k": "3", "floor_pct": "10"}, {"k": "4", "floor_pct": "20"}]
