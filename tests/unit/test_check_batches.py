"""A results folder read in shares (bench/analysis/check/loading.py) gives the points one reading
gives: `points_from_batches` of the shares' `summarize_runs`, cut anywhere (a share summarized
knowing another's specs or not), equals `points_from_records`."""

from __future__ import annotations

import pickle
from dataclasses import asdict

from bench.analysis.check.points import points_from_batches, points_from_records, summarize_runs
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


def test_points_of_batches_cut_anywhere_equal_the_points_of_all_records():
    records = _records()
    whole = [asdict(point) for point in points_from_records(records)]
    assert [(p["status"], p["runs"], len(p["step_runs"])) for p in whole] == [("ok", 4, 4), ("ok", 4, 4), ("oom", 0, 0)]
    # The first ok run of nodes=2 is the first of its two repeat-0 runs (record 3), not record 0 (repeat 3).
    assert whole[0]["mfu_per_token_rate"] == records[3].metrics.mfu / records[3].metrics.tokens_per_s
    for cut in range(len(records) + 1):
        batches = [summarize_runs(records[:cut]), summarize_runs(records[cut:])]
        batches = [pickle.loads(pickle.dumps(batch)) for batch in batches]  # as they cross the pipe
        assert [asdict(point) for point in points_from_batches(batches)] == whole, cut
        later = batches[1]  # the earlier share summarized knowing the later one's specs, as loading.py does
        assert [asdict(point) for point in points_from_batches([summarize_runs(records[:cut], later), later])] == whole
    thirds = [summarize_runs(records[i : i + 4]) for i in range(0, len(records), 4)]
    assert [asdict(point) for point in points_from_batches(thirds)] == whole
