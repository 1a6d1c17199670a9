"""The rows a report of a results folder keeps for the next one (bench/analysis/report/digest_cache.py):
the next report reads only the records that are new or whose file changed, drops those that are gone,
and writes what a report that reads every record (`--no-cache`) writes, byte for byte but for the
page's time line; what is to read goes to the worker pool as a whole folder's does
(bench/analysis/report/reading.py). A file changed just before it was statted is read again next
time. Kept rows of other code, damaged, foreign or writable by others, and a cache folder that cannot
be written are no kept rows: every record is read, with the same report. The console script runs in
this process (tests/bench_cli.py), the pool's workers read apart from it (their reads are not counted
here); the suite's cache folder is its own (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from bench_cli import fsdp_bench
from counted_reads import count_reads

import bench.analysis.pool as pools
import bench.analysis.records as records
import bench.analysis.report.digest_cache as digest_cache
import bench.analysis.report.reading as reading
from bench.analysis.report.digest import digest
from bench.analysis.sources import load_results
from bench.config.paths import CACHE_DIR_VARIABLE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, on_loaded_host  # noqa: E402

OUTPUTS = ("summary.md", "results.csv")


def _sweep(root: Path) -> Path:
    """2 strategies x 3 node counts x 3 repeats (18 records), one on a loaded host, one autotuned
    configuration (notable records, kept whole), one failed point; and a broken file."""
    for strategy in ("full_shard", "shard_grad_op"):
        for nodes in (1, 2, 4):
            for repeat in range(3):
                _write(root, strategy, nodes, repeat)
    (root / "s" / "broken").mkdir(parents=True)
    (root / "s" / "broken" / "result.json").write_text("{not json")
    _settled()
    return root


def _write(root: Path, strategy: str, nodes: int, repeat: int, speedup: float = 1.0, folder: str = "s") -> Path:
    tps = 1000.0 * speedup * nodes**0.9 * (1 + 0.01 * repeat)
    extra = {}
    if strategy == "shard_grad_op":
        extra["prediction"] = {"autotune": {"rank": nodes, "value": tps, "objective": "tokens_per_s"}}
    if (nodes, repeat) == (4, 2) and strategy == "full_shard":
        record = make_record(nodes=4, status="oom", error="CUDA out of memory", strategy=strategy, repeat=2)
    else:
        record = make_record(nodes=nodes, tokens_per_s=tps, strategy=strategy, repeat=repeat, **extra)
    if (strategy, nodes, repeat) == ("full_shard", 2, 1):
        record = on_loaded_host(record)
    path = root / folder / record.point_id / "result.json"
    records.write_record(record, path)
    return path


def _settled() -> None:
    """Wait until the files just written are no longer racy (changed too shortly before a stat to be
    kept with their identity: digest_cache.RACY_NS)."""
    time.sleep(2 * digest_cache.RACY_NS / 1e9)


def _report(results: Path, out: Path, *flags: str) -> tuple:
    proc = fsdp_bench("report", results, "-o", out, *flags)
    page = re.sub(r"Generated [^<]*|-o \S+", "", (out / "report.html").read_text())
    return proc.rc, proc.stdout.replace(str(out), "OUT"), proc.stderr, page, *((out / n).read_bytes() for n in OUTPUTS)


@pytest.fixture
def pooled(monkeypatch):
    """The pool reads from 10 files to read (the folders here are small), 10 files a task."""
    monkeypatch.setattr(reading, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(reading, "CHUNK_RECORDS", 10)
    monkeypatch.setattr(pools, "cpus", lambda: 2)


@pytest.mark.parametrize("cpus", [2, 1], ids=["pool", "one-cpu"])
def test_a_report_reads_only_the_new_and_changed_records_and_writes_what_reading_all_writes(
    tmp_path, monkeypatch, cpus
):
    monkeypatch.setattr(reading, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(pools, "cpus", lambda: cpus)
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    kept = digest_cache.kept_file(results)

    def report(name: str, *flags: str) -> tuple:
        reads.here.clear()
        return _report(results, tmp_path / name, *flags)

    first = report("first")
    assert first[0] == 0 and first[1] == "report: OUT/report.html (18 points: 17 ok, 1 not ok)\n"
    assert reads.here == ([] if cpus == 2 else [19])  # nothing kept yet: 19 files, two tasks of the pool
    kept_first = kept.read_bytes()

    assert report("again") == first and reads.here == [1]  # only the broken file, which has no row to keep
    assert kept.read_bytes() == kept_first  # nothing new: nothing written

    added = _write(results, "no_shard", 8, 0)  # a new point
    _write(results, "full_shard", 1, 0, speedup=1.5)  # a point written again, faster
    removed = results / "s" / make_record(nodes=4, strategy="shard_grad_op", repeat=1).point_id
    (removed / "result.json").unlink()
    _settled()
    changed = report("changed")
    assert reads.here == [3]  # the new, the rewritten and the broken file
    assert changed[1] == "report: OUT/report.html (18 points: 17 ok, 1 not ok)\n"
    kept_changed = kept.read_bytes()
    assert kept_changed != kept_first
    assert changed == report("all", "--no-cache") and reads.here == ([] if cpus == 2 else [19])
    assert kept.read_bytes() == kept_changed  # --no-cache keeps nothing
    assert changed != first and "no_shard" in changed[5].decode() and "no_shard" not in first[5].decode()
    assert report("after") == changed and reads.here == [1]

    records.write_record(make_record(nodes=8, strategy="full_shard"), results / "s" / "broken" / "result.json")
    _settled()  # the broken file made a record: it has a row now, and nothing is left to read
    mended = report("mended")
    assert mended[1] == "report: OUT/report.html (19 points: 18 ok, 1 not ok)\n" and reads.here == [1]
    assert report("mended-again") == mended and reads.here == []
    assert added.exists()


def test_the_pool_reads_what_is_to_read(tmp_path, monkeypatch, pooled):
    """Kept rows and the rows the pool's tasks read, put together in file order."""
    monkeypatch.setattr(reading, "PARALLEL_MIN_RECORDS", 2)
    monkeypatch.setattr(reading, "CHUNK_RECORDS", 3)
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    _report(results, tmp_path / "first")
    for nodes in (1, 2, 4):  # six records written again
        _write(results, "full_shard", nodes, 0, speedup=1.2)
        _write(results, "shard_grad_op", nodes, 2, speedup=0.8)
    _settled()
    reads.here.clear()
    shared = _report(results, tmp_path / "shared")
    assert reads.here == [1, 3, 3][: len(reads.here)]  # 7 to read (with the broken file): tasks of 3, 3 and 1
    reads.here.clear()
    assert (
        shared == _report(results, tmp_path / "all", "--no-cache")
        and reads.here == [1, 3, 3, 3, 3, 3, 3][: len(reads.here)]
    )
    monkeypatch.setattr(pools, "cpus", lambda: 1)
    reads.here.clear()
    assert shared == _report(results, tmp_path / "one-cpu", "--no-cache") and reads.here == [19]


def test_the_first_autotuned_record_is_read_again_where_only_its_row_was_kept(tmp_path, monkeypatch, pooled):
    """Of an autotuned sweep only the first autotuned record is kept whole (the report reads its
    objective); when its file goes, the next one's record is read again, not its row taken."""
    results = _sweep(tmp_path / "results")
    with pools.worker_pool() as pool:
        loaded = reading.read_folder(results, pool=pool)
    tuned = [r for r in loaded.digest.notable if r.prediction]
    kept = digest_cache.load(results)
    # Kept whole: the loaded host's record and, of the 9 autotuned, the first of each task's 10 files (2 tasks).
    assert len(tuned) == 1 and len(kept.tuned) == 9 and len(kept.notable) == 3
    (results / "s" / tuned[0].point_id / "result.json").unlink()
    reads = count_reads(monkeypatch)
    again = _report(results, tmp_path / "again")
    assert reads.here == [2]  # the next autotuned record and the broken file
    assert "Autotune: predicted vs measured ranking" in again[3]
    reads.here.clear()
    assert again == _report(results, tmp_path / "all", "--no-cache")


def test_an_empty_folder_and_a_folder_of_one_record(tmp_path, pooled):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(reading.read_folder(empty).digest) == 0
    assert digest_cache.load(empty) is None  # nothing read, nothing kept
    one = tmp_path / "one"
    records.write_record(make_record(nodes=2), one / "p" / "result.json")
    _settled()
    for _ in range(2):  # read, then kept
        loaded = reading.read_folder(one)
        assert loaded.digest.columns["nodes"] == [2] and list(loaded.point_dirs.values()) == [one / "p"]
    assert digest_cache.load(one).names == ["p/result.json"]


def test_a_file_changed_just_before_it_was_statted_is_read_again(tmp_path, monkeypatch):
    """Racy files (git's word): one changed within RACY_NS of its stat may change again within the same
    tick of the file system's clock unseen; it is kept without its identity and read again next time."""
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    monkeypatch.setattr(digest_cache, "RACY_NS", 10**12)  # every file changed "just now"
    first = _report(results, tmp_path / "first")
    assert digest_cache.load(results).keys == [None] * 18
    reads.here.clear()
    assert _report(results, tmp_path / "again") == first and reads.here == [19]
    monkeypatch.setattr(digest_cache, "RACY_NS", 0)
    _report(results, tmp_path / "settled")
    reads.here.clear()
    assert _report(results, tmp_path / "kept") == first and reads.here == [1]


def test_the_kept_rows_give_the_digest_of_reading_every_record(tmp_path, pooled):
    """Rows kept, new rows and gone ones put together in file order: the columns and the notable records
    (a loaded host; the first autotuned point) of reading the folder whole."""
    results = _sweep(tmp_path / "results")
    with pools.worker_pool() as pool:
        tuned = next(r for r in reading.read_folder(results, pool=pool).digest.notable if r.prediction)
    for nodes in (1, 8):  # new files before and after the kept ones, in file order
        _write(results, "no_shard", nodes, 0, folder="a")
        _write(results, "no_shard", nodes, 1, folder="z")
    _write(results, "shard_grad_op", tuned.spec.nodes, tuned.spec.repeat, speedup=2.0)  # rewritten, faster
    with pools.worker_pool() as pool:
        loaded = reading.read_folder(results, pool=pool)
    records_read, problems, dirs = load_results(results)
    whole = digest(records_read)
    assert _texts(loaded.digest.columns) == _texts(whole.columns) and len(whole.columns["status"]) == 22
    assert [r.point_id for r in loaded.digest.notable] == [r.point_id for r in whole.notable]
    assert [r.model_dump() for r in loaded.digest.notable] == [r.model_dump() for r in whole.notable]
    rewritten = next(r for r in whole.notable if r.prediction)
    assert len(whole.notable) == 2 and rewritten.point_id == tuned.point_id
    assert rewritten.metrics.tokens_per_s == pytest.approx(2 * tuned.metrics.tokens_per_s)
    assert dict(loaded.point_dirs) == dirs and [str(p.path) for p in loaded.problems] == [str(p.path) for p in problems]


def _texts(columns: dict) -> dict:
    """Each column as text: NaN equals NaN (two NaN objects in two lists do not compare equal)."""
    return {name: repr(values) for name, values in columns.items()}


def test_a_file_rewritten_with_the_same_size_and_time_is_read_again(tmp_path, monkeypatch):
    """A file's identity is its size, its modification and change times and its inode: a rewrite in
    place that keeps the size and sets the old modification time back still changes the change time."""
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    first = _report(results, tmp_path / "first")
    path = results / "s" / make_record(nodes=1, strategy="full_shard", repeat=1).point_id / "result.json"
    before = path.stat()
    text = path.read_text()
    faster = text.replace('"tokens_per_s": 1010.0', '"tokens_per_s": 9010.0')
    assert faster != text and len(faster) == len(text)
    with open(path, "r+") as file:  # in place: same inode, same size
        file.write(faster)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_ino == before.st_ino
    _settled()
    reads.here.clear()
    again = _report(results, tmp_path / "again")
    assert reads.here == [2]  # the rewritten file and the broken one
    assert again != first and "9010" in again[5].decode() and "9010" not in first[5].decode()


def test_kept_rows_of_other_code_damaged_or_unwritable_are_no_kept_rows(tmp_path, monkeypatch):
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    first = _report(results, tmp_path / "first")
    kept = digest_cache.kept_file(results)
    assert digest_cache.load(results) is not None

    monkeypatch.setattr(digest_cache, "code_version", lambda: "other code")  # an edit, a checkout, an upgrade
    assert digest_cache.load(results) is None
    reads.here.clear()
    assert _report(results, tmp_path / "other") == first and sum(reads.here) == 19
    monkeypatch.undo()
    reads = count_reads(monkeypatch)

    kept.write_bytes(kept.read_bytes()[:100])  # damaged (a disk that filled up under another writer)
    reads.here.clear()
    assert _report(results, tmp_path / "damaged") == first and sum(reads.here) == 19
    kept.write_bytes(json.dumps({"version": digest_cache.code_version()}).encode())  # not kept rows at all
    assert digest_cache.load(results) is None
    _report(results, tmp_path / "kept-again")
    assert digest_cache.load(results) is not None
    kept.chmod(0o664)  # writable by others (a cache folder set to a shared place): not read
    assert digest_cache.load(results) is None
    kept.chmod(0o600)
    assert digest_cache.load(results) is not None

    unwritable = tmp_path / "cache-file"
    unwritable.write_text("a file where the cache folder would be")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(unwritable))
    for name in ("unwritable", "unwritable-again"):
        reads.here.clear()
        assert _report(results, tmp_path / name) == first and sum(reads.here) == 19


def test_two_spellings_of_a_folder_share_its_kept_rows(tmp_path, monkeypatch):
    results = _sweep(tmp_path / "results")
    reads = count_reads(monkeypatch)
    first = _report(results, tmp_path / "first")
    monkeypatch.chdir(tmp_path)
    reads.here.clear()
    relative = _report(Path("results/"), tmp_path / "relative")
    assert relative[0] == 0 and relative[4:] == first[4:] and reads.here == [1]
