"""`fsdp-bench check` of a results folder against another: both read in this process, each file once
(the baseline first), a broken file skipped with a warning, and the regressions found. The console
script's code in this process (tests/bench_cli.py)."""

from __future__ import annotations

from pathlib import Path

from bench_cli import fsdp_bench
from counted_reads import count_reads

import bench.analysis.records as records
from bench.analysis.check.synthetic import make_record, step_times


def _sweep(root: Path, seed: int, slow: float) -> Path:
    """12 points x 3 runs (one point 40% slower with `slow`, one failed run), and a broken file."""
    for nodes in (1, 2, 4):
        for batch in (1, 2, 3, 4):
            for repeat in range(3):
                median = 0.01 * nodes * batch * (slow if (nodes, batch) == (2, 3) else 1.0)
                status = "failed" if (nodes, batch, repeat) == (4, 4, 1) else "ok"
                record = make_record(
                    step_times(median, 0.05, 12, seed=seed + 7 * nodes + 3 * batch + repeat),
                    spec={"nodes": nodes, "micro_batch": batch, "repeat": repeat},
                    status=status,
                )
                records.write_record(record, root / "s" / record.point_id / "result.json")
    (root / "s" / "broken").mkdir()
    (root / "s" / "broken" / "result.json").write_text("{not json")
    return root


def test_check_of_two_folders_reads_each_once_here(tmp_path, monkeypatch):
    base, cur = _sweep(tmp_path / "base", seed=0, slow=1.0), _sweep(tmp_path / "cur", seed=50, slow=1.4)
    reads = count_reads(monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    rc, stdout, stderr, _ = fsdp_bench(
        "check", cur, "--baseline", base, "--all-rows", "--junit", out / "j.xml", "--summary", out / "s.md"
    )
    assert reads.here == [37, 37]  # the baseline folder, then the current one: every file, in this process
    assert rc == 1 and stdout.splitlines()[-1].startswith("FAIL: 2 regression(s) (12 point(s) compared")
    assert f"warning: skipped {cur / 's' / 'broken' / 'result.json'}: " in stderr
    assert f"warning: skipped {base / 's' / 'broken' / 'result.json'}: " in stderr
    assert b"REGRESSION" in (out / "s.md").read_bytes()
    assert b"<failure" in (out / "j.xml").read_bytes()
