"""points_from_records pools a folder's records into points: grouped by matching identity in
first-seen order, a point's runs its ok records by repeat index (equal indices in record order),
its constants from the first of them, and the status of a point that never ran ok its first record's."""

from __future__ import annotations

from dataclasses import asdict

from bench.analysis.check.points import match_identity, points_from_records, record_steps
from bench.analysis.check.synthetic import make_record, step_times


def _records() -> list:
    """Three points: runs out of repeat order, two runs of one repeat index (the earlier one counts
    first), failed runs before and among the ok ones, a point that never ran ok."""
    runs = []
    for n, (nodes, repeat, status) in enumerate(
        [(2, 3, "ok"), (1, 1, "failed"), (1, 2, "ok"), (2, 0, "ok"), (1, 0, "ok"), (4, 0, "oom"), (2, 0, "ok"),
         (1, 1, "ok"), (4, 1, "timeout"), (2, 1, "failed"), (1, 0, "ok"), (2, 2, "ok")]
    ):  # fmt: skip
        times = step_times(0.05 * nodes, 0.1, 6 + n % 3, seed=n)
        runs.append(make_record(times, spec={"nodes": nodes, "repeat": repeat}, status=status, mfu=0.01 * (n + 1)))
    return runs


def test_points_pool_the_ok_runs_by_repeat_index_in_first_seen_order():
    records = _records()
    points = points_from_records(records)
    whole = [asdict(point) for point in points]
    assert [(p["status"], p["runs"], len(p["step_runs"])) for p in whole] == [("ok", 4, 4), ("ok", 4, 4), ("oom", 0, 0)]
    assert [p.identity for p in points] == [match_identity(records[i].spec) for i in (0, 1, 5)]
    # By repeat index, equal indices in record order: nodes=2 is records 3, 6 (repeat 0), 11, 0; nodes=1 4, 10, 7, 2.
    assert points[0].step_runs == [record_steps(records[i]) for i in (3, 6, 11, 0)]
    assert points[1].step_runs == [record_steps(records[i]) for i in (4, 10, 7, 2)]
    # The first ok run of nodes=2 is the first of its two repeat-0 runs (record 3), not record 0 (repeat 3).
    assert whole[0]["mfu_per_token_rate"] == records[3].metrics.mfu / records[3].metrics.tokens_per_s
    assert whole[1]["mfu_per_token_rate"] == records[4].metrics.mfu / records[4].metrics.tokens_per_s
    assert points[2].step_runs == [] and points[2].counters == {} and points[2].mfu_per_token_rate is None
    assert [asdict(point) for point in points_from_records(iter(records))] == whole  # any iterable, read once
