"""history's figures drawn by a worker pool (reports/history/draw.py, bench/analysis/pool.py) and its
change points found by it (bench/cli/commands/history.py), against the page drawn and the change
points found in this process: the same files, byte for byte (apart from the page's "Generated"
minute), and the same change points; a pool whose workers die has its work done here. In
tests/e2e: it starts processes."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest
from dying_pool import dying_pool

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "records"))
from record_factory import WIGGLE, make_record, night  # noqa: E402

from bench.analysis.history.analyse import analyse  # noqa: E402
from bench.analysis.history.series import build_series  # noqa: E402
from bench.analysis.pool import worker_pool  # noqa: E402

pytestmark = pytest.mark.timeout(300)

STRATEGIES = ("full_shard", "no_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2")
# What the history command's pool imports.
POOLED = ("bench.analysis.history.detect", "otava.analysis", "reports.history.plots")


def _history_series():
    """Five series of 14 runs, a step at run 9 in every other one."""
    records = []
    for number, strategy in enumerate(STRATEGIES):
        base = make_record(tokens_per_s=1000.0, strategy=strategy)
        for i in range(14):
            factor = 0.75 if number % 2 == 0 and i >= 9 else 1.0
            records.append(night(i, 1000.0 * WIGGLE[i % len(WIGGLE)] * factor, record=base))
    series = build_series(records, "tokens_per_s")
    assert len(series) == len(STRATEGIES)
    return series


def _history():
    """Five plots (one per series), so the figures go to the pool."""
    return analyse(_history_series(), metric="tokens_per_s", window=6, detector="apache-otava")


def _files(folder: Path) -> dict[str, bytes]:
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    files["history.html"] = re.sub(rb"Generated [^<]* by", b"Generated (time) by", files["history.html"])
    return files


def test_the_pool_draws_the_page_this_process_draws_byte_for_byte(tmp_path):
    from reports.history.page import write_history

    history = _history()
    with worker_pool(POOLED, workers=2) as pool:
        assert pool is not None
        write_history(history, tmp_path / "pooled", store="s.sqlite", command="fsdp-bench history", pool=pool)
    write_history(history, tmp_path / "here", store="s.sqlite", command="fsdp-bench history")
    with dying_pool() as pool, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_history(history, tmp_path / "died", store="s.sqlite", command="fsdp-bench history", pool=pool)
    assert sorted(re.sub(r" (failed in|was not given to) a worker.*", "", str(w.message)) for w in caught) == [
        f"drawing the series{n:03d} figure" for n in range(1, 6)
    ]
    pooled, here, died = (_files(tmp_path / name) for name in ("pooled", "here", "died"))
    assert sorted(pooled) == ["history.html", "history.xml", *(f"series{n:03d}.png" for n in range(1, 6)), "summary.md"]
    assert pooled == here == died
    assert b"FAIL: 3 new regression(s) in the last 6 run(s)" in pooled["summary.md"]


def test_the_pool_finds_the_change_points_this_process_finds(monkeypatch):
    """The command's pool finds the change points in tasks of CHUNK_SERIES series, in order: what
    detect_each finds here; a pool whose workers die has them found here."""
    import bench.cli.commands.history as command
    from bench.analysis.history.detect import detect_each

    values_of = [s.values for s in _history_series()] * 3  # 15 series: a step in 9 of them
    here = detect_each(values_of)
    assert sorted(len(found) for found in here) == [0] * 6 + [1] * 9
    assert [d.index for found in here for d in found] == [9] * 9
    monkeypatch.setattr(command, "CHUNK_SERIES", 4)  # four tasks
    with worker_pool(POOLED, workers=2) as pool:
        assert command.detect_in(pool)(values_of)() == here
    with dying_pool() as pool, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert command.detect_in(pool)(values_of)() == here
    assert len(caught) == 4 and all(str(w.message).startswith("finding change points ") for w in caught)
