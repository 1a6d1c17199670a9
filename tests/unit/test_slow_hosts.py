"""Hosts that keep being slow (bench/analysis/slow_hosts.py), on synthetic records in a store: what
`history` prints, writes and draws, and the report's cluster-health table."""

from __future__ import annotations

import sys
from pathlib import Path

from bench_cli import in_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import night  # noqa: E402

from bench.analysis.records import write_record  # noqa: E402
from bench.analysis.slow_hosts import host_tallies, slow_hosts  # noqa: E402
from reports.report.cluster_health import cluster_health  # noqa: E402


def run(i: int, slow_host: str | None, hosts=("node-1", "node-7")):
    """Night i over two hosts (one rank each); `slow_host`'s rank takes 30 % longer per step (a straggler)
    and is the slowest rank; None: both alike, rank 0 the slowest by a hair."""
    record = night(i, 1000.0, rank_hosts=list(hosts))
    medians = [0.13 if host == slow_host else 0.10 for host in hosts]
    if slow_host is None:
        medians = [0.1001, 0.1]
    slowest = max(range(len(medians)), key=medians.__getitem__)
    metrics = record.metrics.model_copy(update={"rank_step_time_medians_s": medians, "slowest_rank": slowest})
    return record.model_copy(update={"metrics": metrics})


def five_nights():
    """node-7 slowest (and a straggler) in 4 of 5 nights over two hosts; a one-host night and a record
    without rank hosts (an older one) do not count."""
    records = [run(i, "node-7") for i in range(4)] + [run(4, None)]
    records.append(run(5, "node-7", hosts=("node-7", "node-7")))  # one host: every rank shares it
    older = night(6, 1000.0)  # no env.rank_hosts
    return [*records, older.model_copy(update={"metrics": older.metrics.model_copy(update={"slowest_rank": 0})})]


def test_a_host_slowest_in_most_runs_is_named_with_its_counts():
    tallies = {t.host: t for t in host_tallies(five_nights())}
    assert (tallies["node-7"].runs, tallies["node-7"].slowest, tallies["node-7"].straggler) == (5, 4, 4)
    assert (tallies["node-1"].runs, tallies["node-1"].slowest, tallies["node-1"].straggler) == (5, 1, 0)
    (slow,) = slow_hosts(five_nights())
    assert slow.line() == "node-7: slowest rank in 4 of the last 5 runs over 2+ hosts, a straggler in 4"
    assert slow.row() == ["node-7", "5", "4", "4", "0", tallies["node-7"].last[:19]]


def test_one_slow_run_names_no_host():
    assert slow_hosts([run(0, "node-7")]) == []
    # Hosts that take turns at being the slowest (by a hair, no straggler): none keeps being slow.
    turns = [run(i, None, hosts=("node-1", "node-7") if i % 2 else ("node-7", "node-1")) for i in range(4)]
    assert {t.host: t.slowest for t in host_tallies(turns)} == {"node-1": 2, "node-7": 2}
    assert slow_hosts(turns) == []


def test_history_and_the_report_list_the_host(tmp_path):
    results = tmp_path / "results"
    for i, record in enumerate(five_nights()):
        write_record(record, results / record.sweep / f"p{i}" / "result.json")
    store = tmp_path / "s.sqlite"
    added = in_process("store", "add", results, "--store", store)
    assert added.rc == 0, added.stderr
    shown = in_process("history", "--store", store, "-o", tmp_path / "out")
    assert shown.rc == 0, shown.stderr
    line = "node-7: slowest rank in 4 of the last 5 runs over 2+ hosts, a straggler in 4"
    assert f"hosts that keep being slow:\n  {line}" in shown.stdout
    assert f"- {line}" in (tmp_path / "out" / "summary.md").read_text()
    page = (tmp_path / "out" / "history.html").read_text()
    assert 'id="slow-hosts"' in page and line in page
    health = cluster_health([], five_nights())
    assert [row[:5] for row in health.slow_hosts.rows] == [["node-7", "5", "4", "4", "0"]]
