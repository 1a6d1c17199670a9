"""`fsdp-bench report` of a results folder read by two processes (bench/analysis/report_reader.py, a
forking.Worker) writes what one process writes, byte for byte but for the page's time line: with the
reader, with one CPU (no reader), with a reader that fails while it reads or dies at the start (its
share is then read here), and where fork itself fails (every record read each time: `--no-cache`;
tests/e2e/test_report_kept_rows.py has the reports that read only what changed). The console script's code in this process
(tests/bench_cli.py); the reader is forked from it, so the size that lets a small folder use one is
set here."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from bench_cli import fsdp_bench
from counted_reads import count_reads

import bench.analysis.forking as forked
import bench.analysis.records as records
import bench.analysis.report_reader as reader
from bench.analysis.forking import can_fork

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
    return (
        proc.rc,
        proc.stdout.replace(str(out), "OUT"),
        proc.stderr,
        page,
        *((out / n).read_bytes() for n in OUTPUTS[1:]),
    )


def test_a_forked_reader_gives_the_report_of_one_process(tmp_path, monkeypatch):
    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs): the report reads serially")
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    reads_here = reads.here

    def report(name: str) -> tuple:  # every record read each time: no rows kept from the report before
        reads_here.clear()
        return _report(results, tmp_path / name, "--no-cache")

    monkeypatch.setattr(reader, "PARALLEL_MIN_RECORDS", 10)  # 28 files: 10 read here, 18 by the reader
    monkeypatch.setattr(forked, "cpus", lambda: 2)
    shared = report("shared")
    assert reads_here == [reader.own_share(28)] == [10]
    rc, stdout, stderr, page, summary, csv = shared
    assert rc == 0 and stdout == "report: OUT/report.html (27 points: 26 ok, 1 not ok)\n"
    assert f"report: skipped {results / 's' / 'broken' / 'result.json'}: " in stderr  # from the reader's share
    assert "Points measured on a loaded host (1)" in page and "Autotune: predicted vs measured ranking" in page
    assert csv.count(b"\n") == 28  # a header and every point

    monkeypatch.setattr(forked, "cpus", lambda: 1)  # one CPU: no reader, the folder read here
    assert report("serial") == shared and reads_here == [28]
    monkeypatch.setattr(forked, "cpus", lambda: 2)

    reads.fail_in_worker = True  # the reader fails while it reads: its share is read here
    assert report("failed") == shared and reads_here == [10, 18]

    monkeypatch.setattr(forked, "_serve", lambda *args: os._exit(3))  # dies before its first result
    assert report("died") == shared and reads_here == [10, 18]

    def no_fork():  # a pids limit or no memory: fork fails, and the report reads and draws itself
        raise BlockingIOError(11, "Resource temporarily unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fork", no_fork)
        assert report("no_fork") == shared and reads_here == [28]


def test_the_forked_reader_gives_each_records_folder_as_one_process_does(tmp_path, monkeypatch):
    """The folders are kept as the paths read and made Paths when asked for (bench/analysis/report_reader.py
    PointDirs): the mapping one process's load_results gives, compared key by key."""
    from bench.analysis.sources import load_results

    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs): the report reads serially")
    results = _sweep(tmp_path / "results")
    monkeypatch.setattr(reader, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(forked, "cpus", lambda: 2)
    with reader.ReportLoader.start(results) as loader:
        dirs = loader.load().point_dirs
    expected = load_results(results)[2]
    assert isinstance(dirs, reader.PointDirs) and len(dirs) == len(expected) == 27
    assert dirs == expected and all(dirs[key] == folder for key, folder in expected.items())
    assert dirs.get(("s", "no such point")) is None


def test_the_folder_is_listed_by_a_process_forked_before_the_schema_is_imported(tmp_path, monkeypatch):
    """bench/analysis/folder_listing.py: importing it loads neither pydantic nor the record schema (the
    `report` command forks its listing process before them), and that process lists the folder: this
    one lists only where none could be forked, with the same report."""
    import subprocess

    import bench.analysis.folder_listing as folder_listing

    code = "import sys, bench.analysis.folder_listing; print(sorted({'pydantic', 'bench.schema.record'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs): the report reads serially")
    results = _sweep(tmp_path / "results")
    parent, listed, listings_here = os.getpid(), folder_listing.listed, []

    def counted(path, keep):
        if os.getpid() == parent:
            listings_here.append(str(path))
        return listed(path, keep)

    monkeypatch.setattr(folder_listing, "listed", counted)
    monkeypatch.setattr(forked, "cpus", lambda: 2)
    shared = _report(results, tmp_path / "shared", "--no-cache")
    assert listings_here == []
    monkeypatch.setattr(forked, "cpus", lambda: 1)
    assert _report(results, tmp_path / "serial", "--no-cache") == shared and listings_here == [str(results)]


def test_the_listing_is_of_the_folder_as_its_path_spells_it_and_stopped_when_the_loader_fails(tmp_path, monkeypatch):
    """The listing process lists the folder as `Path` spells it (`results/./` is `results`: the kept
    rows' file names are cut at that text), and a loader that fails to start leaves no process behind."""
    import bench.analysis.folder_listing as folder_listing

    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs): the report reads serially")
    results = _sweep(tmp_path / "results")
    monkeypatch.setattr(forked, "cpus", lambda: 2)
    listing = folder_listing.start(f"{results}/./", keep=True)
    assert listing.running
    listed, found = listing.result(lambda: pytest.fail("the listing process sent nothing"))
    listing.close()
    assert listed == folder_listing.listed(results, keep=True)[0] and len(listed["result.json"]) == 28
    assert len(found.keys) == 28 and None not in found.keys

    def failing_plan(*args):
        raise RuntimeError("the plan failed")

    monkeypatch.setattr(reader.digest_cache, "plan", failing_plan)
    listing = folder_listing.start(results, keep=False)
    with pytest.raises(RuntimeError, match="the plan failed"):
        reader.ReportLoader.start(results, keep=False, listing=listing)
    assert listing.pid is None  # stopped and reaped
