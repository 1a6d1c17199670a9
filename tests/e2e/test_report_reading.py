"""`fsdp-bench report` of a results folder whose records and figures are tasks of a worker pool
(bench/analysis/report/reading.py, reports/report/render.py, bench/analysis/pool.py) writes what one
process writes, byte for byte but for the page's time line: with the pool, with one CPU (no pool),
and with a pool whose workers die (their records read and their figures drawn here). Every record
is read each time (`--no-cache`; tests/e2e/test_report_kept_rows.py has the reports that read only
what changed). The console script's code runs in this process (tests/bench_cli.py), so the sizes
from which a folder's reading and a report's figures go to the pool are set here."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest
from bench_cli import fsdp_bench
from counted_reads import count_reads
from dying_pool import dying_pool

import bench.analysis.pool as pools
import bench.analysis.records as records
import bench.analysis.report.reading as reading
import reports.report.render as render

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, on_loaded_host  # noqa: E402

OUTPUTS = ("report.html", "summary.md", "results.csv")


def _sweep(root: Path) -> Path:
    """3 strategies x 3 node counts x 3 repeats (27 records): one run on a loaded host, one autotuned
    configuration, one failed point; and a broken file."""
    for strategy in ("full_shard", "shard_grad_op", "no_shard"):
        for nodes in (1, 2, 4):
            for repeat in range(3):
                tps = 1000.0 * nodes ** (0.9 if strategy == "no_shard" else 0.95) * (1 + 0.01 * repeat)
                extra = {}
                if strategy == "shard_grad_op":
                    extra["prediction"] = {"autotune": {"rank": nodes, "value": tps, "objective": "tokens_per_s"}}
                record = make_record(nodes=nodes, tokens_per_s=tps, strategy=strategy, repeat=repeat, **extra)
                if (strategy, nodes, repeat) == ("full_shard", 2, 1):
                    record = on_loaded_host(record)
                if (strategy, nodes, repeat) == ("no_shard", 4, 2):
                    record = make_record(nodes=4, status="oom", error="CUDA out of memory", strategy=strategy, repeat=2)
                records.write_record(record, root / "s" / record.point_id / "result.json")
    (root / "s" / "broken").mkdir()
    (root / "s" / "broken" / "result.json").write_text("{not json")
    return root


def _report(results: Path, out: Path, *flags: str) -> tuple:
    proc = fsdp_bench("report", results, "-o", out, *flags)
    # The page's own time line and its command line (which names `out`) differ by nature.
    page = re.sub(r"Generated [^<]*|-o \S+", "", (out / "report.html").read_text())
    pngs = {path.name: path.read_bytes() for path in sorted(out.glob("*.png"))}
    return (
        proc.rc,
        proc.stdout.replace(str(out), "OUT"),
        proc.stderr,
        page,
        *((out / n).read_bytes() for n in OUTPUTS[1:]),
        pngs,
    )


@pytest.fixture
def pooled(monkeypatch):
    """A folder of 10 files or more is read by the pool, 8 files a task; a report of 10 points or more
    has its figures drawn there."""
    monkeypatch.setattr(reading, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(reading, "CHUNK_RECORDS", 8)
    monkeypatch.setattr(render, "PARALLEL_MIN_POINTS", 10)
    monkeypatch.setattr(pools, "cpus", lambda: 2)


def test_a_worker_pool_gives_the_report_of_one_process(tmp_path, monkeypatch, pooled):
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)

    def report(name: str) -> tuple:  # every record read each time: no rows kept from the report before
        reads.here.clear()
        return _report(results, tmp_path / name, "--no-cache")

    shared = report("pooled")
    # 28 files in chunks of 8, 8, 8 and 4: the pool's tasks, but for the last chunks, read here while
    # the pool's first worker was starting (none where it started at once).
    assert reads.here == [4, 8, 8][: len(reads.here)]
    rc, stdout, stderr, page, summary, csv, pngs = shared
    assert rc == 0 and stdout == "report: OUT/report.html (27 points: 26 ok, 1 not ok)\n"
    assert f"report: skipped {results / 's' / 'broken' / 'result.json'}: " in stderr  # from a worker's task
    assert "Points measured on a loaded host (1)" in page and "Autotune: predicted vs measured ranking" in page
    assert csv.count(b"\n") == 28  # a header and every point
    assert sorted(pngs) == ["efficiency.png", "memory.png", "step_times.png", "throughput.png", "tokens_per_device.png"]

    monkeypatch.setattr(pools, "cpus", lambda: 1)  # one CPU: no pool, the folder read and drawn here
    assert report("one-cpu") == shared and reads.here == [28]
    monkeypatch.setattr(pools, "cpus", lambda: 2)

    monkeypatch.setattr(pools, "worker_pool", dying_pool)  # every worker dies: its work is done here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert report("died") == shared and sorted(reads.here) == [4, 8, 8, 8]
    done_here = sorted({re.sub(r" (failed in|was not given to) a worker.*", "", str(w.message)) for w in caught})
    assert done_here == [*(f"drawing the {name} figure" for name in sorted(render.figure_names())), "reading records"]


def test_the_pool_gives_each_records_folder_as_one_process_does(tmp_path, pooled):
    """The folders are kept as the paths read and made Paths when asked for (reading.py PointDirs): the
    mapping one process's load_results gives, compared key by key."""
    from bench.analysis.sources import load_results

    results = _sweep(tmp_path / "results")
    with pools.worker_pool(["bench.analysis.report.reading"]) as pool:
        loaded = reading.read_folder(results, keep=False, pool=pool)
    dirs, expected = loaded.point_dirs, load_results(results)[2]
    assert isinstance(dirs, reading.PointDirs) and len(dirs) == len(expected) == 27
    assert dirs == expected and all(dirs[key] == folder for key, folder in expected.items())
    assert dirs.get(("s", "no such point")) is None
    assert loaded.preflight_files == [] and [p.path.name for p in loaded.problems] == ["result.json"]


def test_a_folder_given_as_results_dot_is_the_folder(tmp_path, pooled):
    """`results/./` is listed and read as `results` (the kept rows' file names are cut at the folder's text)."""
    results = _sweep(tmp_path / "results")
    assert _report(Path(f"{results}/./"), tmp_path / "dotted")[3:] == _report(results, tmp_path / "plain")[3:]
