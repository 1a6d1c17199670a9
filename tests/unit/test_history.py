"""History's logic on hand-made records whose numbers the tests choose: series keys and order, change
points with their magnitude, interval and environment change, the gate's window, too-short series,
the numerics guard along a series, the efficiency series, the outputs and the store's migration."""

from __future__ import annotations

import json
import math
import sqlite3
import sys
import xml.etree.ElementTree as ET
from datetime import timedelta
from pathlib import Path

import pytest
from bench_cli import in_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import BASE_ENV as ENV  # noqa: E402
from record_factory import START, WIGGLE, make_record, night, nights  # noqa: E402

from bench.analysis.history.analyse import analyse, analyse_series  # noqa: E402
from bench.analysis.history.envdiff import env_changes  # noqa: E402
from bench.analysis.history.series import EFFICIENCY, build_series, efficiency_series  # noqa: E402
from bench.analysis.stats import series_key  # noqa: E402
from bench.schema.env import EnvInfo  # noqa: E402
from bench.schema.spec import DebugKnobs  # noqa: E402

# The first store's table, as version 1 of the store created it.
V1_STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    point_id TEXT NOT NULL, content_hash TEXT NOT NULL, sweep TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    model TEXT, strategy TEXT, precision TEXT, cluster TEXT, launcher TEXT, nodes INTEGER, gpus_per_node INTEGER,
    world_size INTEGER, micro_batch INTEGER, grad_accum INTEGER, seq_len INTEGER, repeat INTEGER,
    tokens_per_s REAL, tokens_per_s_per_device REAL, mfu REAL, peak_mem_bytes INTEGER, env_fingerprint TEXT,
    started_at TEXT, finished_at TEXT, source TEXT, ingested_at TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (point_id, content_hash)
);
"""
V1_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records" / "v1" / "v1_scaling"

BASE = make_record(tokens_per_s=1000.0)


def test_series_key_leaves_out_repeat_and_debug_knobs_and_keeps_what_defines_the_work():
    identity = BASE.spec.identity()
    slowed = BASE.spec.model_copy(update={"repeat": 3, "debug": DebugKnobs(slow_fraction=0.5)}).identity()
    assert identity != slowed and series_key(identity) == series_key(slowed)
    two_nodes = {**identity, "nodes": 2, "world_size": 2}
    assert series_key(two_nodes) != series_key(identity)
    assert series_key(two_nodes, across_nodes=True) == series_key(identity, across_nodes=True)


def test_an_identity_is_computed_once_per_spec_and_specs_written_alike_stay_apart(monkeypatch):
    from bench.schema.spec import RunSpec

    records, identity, calls = nights(6), RunSpec.identity, []
    monkeypatch.setattr(RunSpec, "identity", lambda spec: calls.append(spec) or identity(spec))
    assert [len(s.runs) for s in build_series(records, "tokens_per_s")] == [6] and len(calls) == 1
    # NaN and infinity are both written `null` in a spec's JSON: not the same configuration for that.
    odd = [
        night(i, 1000.0, record=BASE.model_copy(update={"spec": BASE.spec.model_copy(update={"model": model})}))
        for i, model in enumerate(BASE.spec.model.model_copy(update={"norm_eps": v}) for v in (math.nan, math.inf))
    ]
    assert [len(s.runs) for s in build_series(odd, "tokens_per_s")] == [1, 1]


def test_series_are_ordered_by_run_time_and_split_by_configuration():
    other = make_record(tokens_per_s=500.0, strategy="no_shard")
    records = nights(6) + [night(i, 500.0, record=other) for i in range(3)]
    series = build_series(list(reversed(records)), "tokens_per_s")
    assert [len(s.runs) for s in series] == [3, 6]  # in order of each series' first run (ties: sweep name)
    six = series[1]
    assert [r.sweep for r in six.runs] == [f"night{i:02d}" for i in range(6)]
    assert six.label.startswith("debug 1x1 full_shard fp32") and " no_shard " in series[0].label
    assert build_series(records, "tokens_per_s", since=START + timedelta(days=4))[0].values == pytest.approx(
        [1000.0 * WIGGLE[4], 1000.0 * WIGGLE[5]]
    )


def test_a_step_is_found_at_its_first_run_with_magnitude_interval_and_environment_change():
    env_after = {"torch": "2.13.0", "git_sha": "b" * 40, "env_vars": {"NCCL_ALGO": "Tree", "FI_PROVIDER": "efa"}}
    records = nights(12) + [
        night(i, 800.0 * WIGGLE[i % 8], torch="2.13.0", git_sha="b" * 40, env_vars=env_after["env_vars"])
        for i in range(12, 20)
    ]
    records[11] = records[11].model_copy(update={"env": EnvInfo(**{**ENV, "env_vars": {"NCCL_ALGO": "Ring"}})})
    (series,) = build_series(records, "tokens_per_s")
    result = analyse_series(series, window=8)
    (change,) = result.changes
    assert change.index == 12 and change.run.sweep == "night12" and change.previous.sweep == "night11"
    assert change.regression and change.direction == "regression" and change.new
    assert (change.runs_before, change.runs_after) == (12, 8)
    assert change.ratio == pytest.approx(0.8, rel=0.01)
    assert change.ci_low < change.ratio < change.ci_high < 1.0  # the interval excludes "no change"
    assert change.pvalue < 0.001
    assert analyse_series(series, intervals=False).changes[0].ratio == pytest.approx(change.ratio)
    assert change.environment == [
        "torch: 2.12.0 -> 2.13.0",
        "git: aaaaaaaaaaaa..bbbbbbbbbbbb",
        "FI_PROVIDER: (unset) -> efa",
        "NCCL_ALGO: Ring -> Tree",
    ]
    assert result.failing == [change]


@pytest.mark.parametrize(("window", "factor", "fails"), [(8, 0.8, True), (5, 0.8, False), (8, 1.25, False)])
def test_the_gate_fails_only_on_a_change_for_the_worse_within_the_last_n_runs(window, factor, fails):
    history = analyse(
        build_series(nights(20, step_at=12, factor=factor), "tokens_per_s"), metric="tokens_per_s", window=window
    )
    assert len(history.changes) == 1 and history.changes[0].regression == (factor < 1)
    assert history.exit_code == (1 if fails else 0)
    report_only = analyse(build_series(nights(20, step_at=12), "tokens_per_s"), metric="tokens_per_s")
    assert report_only.exit_code == 0  # no --fail-on-new-regression: report only


def test_step_time_up_is_the_worse_way():
    records = nights(20, step_at=12, factor=0.8)
    (series,) = build_series(records, "step_time_s")
    (change,) = analyse_series(series).changes
    assert change.ratio == pytest.approx(1.25, rel=0.02) and change.regression


def test_a_debug_knob_stays_in_its_series_and_is_shown_like_an_environment_change():
    records = nights(10) + [night(i, 500.0, slow=1.0) for i in range(10, 14)]
    (series,) = build_series(records, "tokens_per_s")
    (change,) = analyse_series(series).changes
    assert change.index == 10 and change.environment == ["debug.slow_fraction: 0.0 -> 1.0"]


def test_too_short_series_are_listed_and_never_silently_passed(tmp_path):
    from reports.history.outputs import write_history_junit
    from reports.history.table import verdict_line

    history = analyse(build_series(nights(4), "tokens_per_s"), metric="tokens_per_s", window=2)
    assert history.exit_code == 0 and len(history.too_short) == 1 and history.changes == []
    assert verdict_line(history) == "PASS (1 series (0 tested, 1 too short), 0 change point(s), 0 numerics failure(s))"
    write_history_junit(history, tmp_path / "h.xml")
    case = ET.parse(tmp_path / "h.xml").getroot().find("testsuite/testcase")
    assert case.find("skipped").get("message").startswith("insufficient: ")
    assert "4 run(s) < 6: too short to test" in case.find("skipped").get("message")


def test_numerics_guard_names_the_run_and_step_where_the_curve_left_its_rule():
    curve = [6.0, 5.9, 5.8, 5.7]
    records = [night(i, 1000.0, losses=list(curve)) for i in range(8)]
    records[3] = night(3, 1000.0, losses=[6.0, 5.9, math.nan, 5.7])  # NaN: fails wherever it is
    records[5] = night(5, 1000.0, losses=[6.0, 5.9, 5.8 + 1e-6, 5.7])  # same stack on CPU: exact rule
    records[6] = night(6, 1000.0, losses=[6.0, 5.9, 5.8 + 1e-6, 5.7], torch="2.13.0")  # new torch: 1 % rule
    records[7] = night(7, 1000.0, losses=[6.0, 6.2, 5.8, 5.7], torch="2.14.0")  # 3 % off at step 1
    (series,) = build_series(records, "tokens_per_s")
    result = analyse_series(series, window=1)
    found = [(issue.index, issue.verdict.verdict, issue.verdict.step, issue.new) for issue in result.numerics]
    assert found == [(3, "non-finite", 2, False), (5, "diverged", 2, False), (7, "diverged", 1, True)]
    assert result.numerics[2].verdict.describe() == "loss diverged at step 1: 5.9 -> 6.2 (rtol 0.01)"
    assert result.numerics_checked == 7
    assert analyse_series(series, window=1, numerics=False).numerics == []


def test_efficiency_at_the_largest_node_count_per_sweep_run():
    two = make_record(nodes=2, tokens_per_s=1000.0)
    records = []
    for i in range(8):
        tps1, tps2 = 1000.0, (1800.0 if i < 5 else 1200.0) * WIGGLE[i]
        folder = f"/results/night{i:02d}/sweep"
        records.append(night(i, tps1, log_dir=f"{folder}/a"))
        records.append(night(i, tps2, record=two, log_dir=f"{folder}/b"))
    (series,) = efficiency_series(records)
    assert series.metric == EFFICIENCY and len(series.runs) == 8
    assert series.runs[0].value == pytest.approx(0.9) and series.runs[6].value == pytest.approx(0.6 * WIGGLE[6])
    assert series.label.startswith("debug 2x1 full_shard") and series.label.endswith("efficiency vs 1 node(s)")
    (change,) = analyse_series(series).changes
    assert change.index == 5 and change.regression


def test_env_changes_lists_only_what_changed():
    before, after = (
        night(0, 1000.0),
        night(1, 1000.0, cuda="12.4", driver="550.54.15", env_vars={"OMP_NUM_THREADS": "4"}),
    )
    assert env_changes(before, after) == ["cuda: None -> 12.4", "driver: None -> 550.54.15"]  # OMP_*: not NCCL/FI
    assert env_changes(before, night(1, 1000.0, git_dirty=True)) == ["git: aaaaaaaaaaaa..aaaaaaaaaaaa+dirty"]


def test_outputs_show_the_change_newest_first_and_mark_it_in_the_plot(tmp_path):
    from reports.history.page import write_history
    from reports.history.plots import series_figure

    history = analyse(
        build_series(nights(20, step_at=12, torch="2.13.0"), "tokens_per_s"),
        metric="tokens_per_s",
        window=8,
        detector="d",
    )
    page = write_history(history, tmp_path, store="s.sqlite", command="fsdp-bench history")
    html = page.read_text()
    assert "night12 2026-05-13 02:00:00" in html and "torch: 2.12.0 -&gt; 2.13.0" in html
    assert "FAIL: 1 new regression(s) in the last 8 run(s)" in html
    assert (tmp_path / "series001.png").read_bytes().startswith(b"\x89PNG")
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## fsdp-bench history: FAIL: 1 new regression(s)") and "| night12 " in summary
    suite = ET.parse(tmp_path / "history.xml").getroot().find("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("fsdp-bench history", "1", "1")
    fig = series_figure(history.results[0])
    gids = {artist.get_gid() for artist in fig.axes[0].get_children()}
    assert {"runs", "change:12", "note:12", "segment:0", "segment:12"} <= gids


def test_an_older_store_is_migrated_in_place_and_stays_readable(tmp_path):
    from bench.analysis.store import STORE_SCHEMA_VERSION, SQLiteStore
    from bench.analysis.store.sqlite import schema_version

    path = tmp_path / "v1.sqlite"
    record = night(0, 1000.0)
    conn = sqlite3.connect(path)
    conn.executescript(V1_STORE_SCHEMA + "PRAGMA user_version = 1;")
    insert = "INSERT INTO results (point_id, content_hash, sweep, status, started_at, ingested_at, record) VALUES (?, ?, ?, 'ok', ?, 'now', ?)"
    conn.execute(insert, (record.point_id, "h", record.sweep, record.started_at, record.model_dump_json()))
    # A version-1 record as the first store kept it: as written, under its version-1 point id.
    old_file = next(V1_FIXTURES.glob("*/result.json"))
    old = json.loads(old_file.read_text())
    conn.execute(insert, (old["point_id"], "h1", old["sweep"], old["started_at"], json.dumps(old)))
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    assert schema_version(path) == STORE_SCHEMA_VERSION == 5
    assert store.count(git_sha="a" * 40) == 1
    read, problems = store.records(latest_only=False)
    assert problems == [] and record in read and len(read) == 2
    assert store.preflights() == ([], [])  # schema 3: the preflights table, created by the migration
    # Schema 4 keys old rows as today's code reads them: the same result.json is not stored twice.
    report = store.ingest_paths(old_file.parent)
    assert (report.added, report.unchanged) == (0, 1) and store.count() == 2


def test_a_newer_store_is_refused_with_the_way_out(tmp_path):
    from bench.analysis.store import SQLiteStore

    path = tmp_path / "v9.sqlite"
    sqlite3.connect(path).execute("PRAGMA user_version = 9").connection.close()
    with pytest.raises(ValueError, match="schema version 9, this fsdp-bench reads up to 5; rebuild it"):
        SQLiteStore(path)


def test_store_add_command(tmp_path):
    from bench.analysis.records import write_record

    for i, record in enumerate(nights(3)):
        write_record(record, tmp_path / "results" / f"p{i}" / "result.json")
    (tmp_path / "results" / "bad").mkdir()
    (tmp_path / "results" / "bad" / "result.json").write_text("{")
    store = tmp_path / "s.sqlite"
    run = in_process("store", "add", tmp_path / "results", "--store", store)
    assert run.rc == 1  # one refused
    assert "3 added, 0 already stored, 1 refused; 3 records in all" in run.stdout
    run = in_process("store", "add", tmp_path / "results", "--store", store)
    assert run.rc == 1
    assert "0 added, 3 already stored" in run.stdout
    run = in_process("store", "add", tmp_path / "nowhere", "--store", store)
    assert (run.rc, run.stderr) == (2, f"error: RESULTS: {tmp_path / 'nowhere'} does not exist\n")
    json_file = tmp_path / "not-a-store.json"
    json_file.write_text(json.dumps({}))
    run = in_process("store", "add", tmp_path / "results", "--store", json_file)
    assert (run.rc, run.stderr) == (2, f"error: --store: {json_file} exists and is not an SQLite store\n")


def test_stored_preflights_list_the_clusters_measured_links_over_time(tmp_path):
    """Preflight records under a results folder go into the store beside the results (idempotently) and
    history lists each one's measured links, oldest first, printed and in its outputs."""
    import importlib.util

    from bench.analysis.records import write_record

    script = Path(__file__).resolve().parents[2] / "scripts" / "p5_anchor_from_preflight.py"
    spec = importlib.util.spec_from_file_location("p5_anchor", script)
    anchor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(anchor)
    results = tmp_path / "results"
    for i, record in enumerate(nights(6)):
        write_record(record, results / record.sweep / f"p{i}" / "result.json")
    inter = {}
    for day, busbw in ((1, 300.0), (0, 150.0)):  # written newest first: listed by start time
        preflight = anchor.preflight_record(busbw).model_copy(
            update={"sweep": f"night-{day}", "started_at": (START + timedelta(days=day)).isoformat()}
        )
        inter[day] = preflight.measured_links["inter_node_gbps"]
        path = results / f"night-{day}" / "_preflight" / "2x8" / "preflight.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(preflight.model_dump_json())
    store = tmp_path / "s.sqlite"
    run = in_process("store", "add", results, "--store", store)
    assert run.rc == 0, run.stderr
    assert "6 added, 0 already stored, 0 refused; 6 records in all; preflights: 2 added" in run.stdout
    run = in_process("store", "add", results, "--store", store)
    assert run.rc == 0, run.stderr
    assert "preflights: 0 added, 2 already stored" in run.stdout
    run = in_process("history", "--store", store, "-o", tmp_path / "out")
    assert run.rc == 0, run.stderr
    printed = run.stdout.split("measured links (preflights), oldest first:")[1].splitlines()
    rows = [line for line in printed if "night-" in line]
    assert [row.split()[1] for row in rows] == ["night-0", "night-1"]
    assert [row.split()[7] for row in rows] == [f"{inter[0]:.4g}", f"{inter[1]:.4g}"]
    assert inter[1] == pytest.approx(2 * inter[0])  # twice the world ring's bus bandwidth
    assert f"| {inter[0]:.4g} |" in (tmp_path / "out" / "summary.md").read_text()
    assert 'id="links"' in (tmp_path / "out" / "history.html").read_text()


def test_a_change_point_shows_the_profiled_split_before_and_after():
    """Runs that profiled (metrics.step_breakdown): the change's row names each side's split as shares
    of the step, next to the environment change."""
    from bench.schema.breakdown import StepBreakdown
    from reports.history.table import change_row

    records = nights(10) + [night(i, 500.0, slow=1.0) for i in range(10, 14)]
    for index, record in enumerate(records):
        exposed = 0.1 if index < 10 else 0.4
        record.metrics.step_breakdown = StepBreakdown(
            steps=2, step_s=1.0, compute_s=0.5, exposed_comm_s=exposed, idle_s=0.5 - exposed
        )
    (series,) = build_series(records, "tokens_per_s")
    (change,) = analyse_series(series).changes
    assert change_row(change)[-1] == (
        "debug.slow_fraction: 0.0 -> 1.0; step split: compute 50% -> 50%, exposed comm 10% -> 40%, idle 40% -> 10%"
    )


def _clean_ops() -> dict[str, list[float]]:
    """The operations summary of a real profiled `debug` point (tests/fixtures/traces, 2 gloo ranks)."""
    import gzip

    from bench.schema.breakdown import op_summary
    from fsdp_core.step_split import rank_medians, split_trace

    traces = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
    ranks = []
    for rank in (0, 1):
        trace = json.loads(gzip.decompress((traces / f"debug_clean_rank{rank}.json.gz").read_bytes()))
        ranks.append(rank_medians(split_trace(trace))["ops"])
    return op_summary(ranks)


def _profiled(records, ops, idle_s: float) -> None:
    from bench.schema.breakdown import StepBreakdown

    for record in records:
        record.metrics.step_breakdown = StepBreakdown(steps=2, step_s=0.04 + idle_s, idle_s=idle_s, ops=ops)


def test_a_sleep_grows_no_operation_only_idle():
    """debug.slow_fraction sleeps in the step: the change point names no operation, the idle per step."""
    from reports.history.table import change_row

    ops = _clean_ops()
    assert {"aten::mm", "FSDP::all_gather", "gloo:all_gather", "c10d::_allgather_base_"} <= set(ops)
    assert len(ops) < 60  # the top 30 by self time, FSDP's ranges and the collectives
    clean, slow = nights(10), [night(i, 500.0, slow=1.0) for i in range(10, 14)]
    _profiled(clean, ops, 0.017)
    _profiled(slow, ops, 0.517)
    (series,) = build_series(clean, "tokens_per_s")
    assert analyse_series(series).changes == []  # the clean nights alone: nothing to name
    (series,) = build_series(clean + slow, "tokens_per_s")
    (change,) = analyse_series(series).changes
    text = change_row(change)[-1]
    assert text.startswith("debug.slow_fraction: 0.0 -> 1.0; step split: ")
    assert text.endswith("; no operation grew; idle per step +500 ms (17 -> 517 ms)")


def test_extra_matmuls_are_named_by_their_calls_per_step():
    """debug.extra_matmuls=N adds N matmuls per block: aten::mm's calls per step up by N x blocks (2 in
    `debug`), named first, beside the knob's change in the environment diff."""
    from reports.history.table import change_row

    ops = _clean_ops()
    calls, self_s = ops["aten::mm"]
    extra = {**ops, "aten::mm": [calls + 4 * 2, self_s * 3]}
    clean = nights(10)
    slow = [night(i, 800.0) for i in range(10, 14)]
    for record in slow:
        record.spec = record.spec.model_copy(update={"debug": DebugKnobs(extra_matmuls=4)})
    _profiled(clean, ops, 0.017)
    _profiled(slow, extra, 0.017)
    (series,) = build_series(clean + slow, "tokens_per_s")
    (change,) = analyse_series(series).changes
    text = change_row(change)[-1]
    assert text.startswith("debug.extra_matmuls: 0 -> 4; step split: ")
    assert text.split("; ")[2].startswith(
        f"operations that grew: aten::mm {calls:g} -> {calls + 8:g} calls/step, self {2 * self_s * 1e3:+.2f} ms/step"
    )
