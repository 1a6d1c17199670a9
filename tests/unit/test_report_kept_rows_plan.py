"""Kept rows and rows read afresh put together (bench/analysis/report/digest_cache.py `plan`,
`Plan.assemble`) give the digest of reading every readable record, on seeded random folders: files
added, removed and changed since the rows were kept, files that cannot be read, autotuned records
(only the first of each share read is kept whole), loaded hosts, reads shared out in two parts; and a
report after it, with nothing changed, reads only what has no row."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, on_loaded_host  # noqa: E402

from bench.analysis.folder_listing import Identities  # noqa: E402
from bench.analysis.report import digest_cache  # noqa: E402
from bench.analysis.report.digest import digest, record_rows  # noqa: E402

FOLDER = "/results"
TAKEN_NS = 10**18  # long after every identity below: none is racy


def _pool(rng: random.Random) -> list:
    pool = []
    for strategy in ("full_shard", "shard_grad_op", "no_shard"):
        for nodes in (1, 2, 4, 8):
            for repeat in range(2):
                extra = {}
                if strategy != "full_shard" and rng.random() < 0.7:
                    extra["prediction"] = {"autotune": {"rank": nodes, "value": 1.0, "objective": "tokens_per_s"}}
                record = make_record(
                    nodes=nodes, tokens_per_s=1000.0 * nodes, strategy=strategy, repeat=repeat, **extra
                )
                pool.append(on_loaded_host(record) if rng.random() < 0.2 else record)
    return pool


def _file(index: int) -> str:
    return f"{FOLDER}/{index:03d}/result.json"


def _index(file: str) -> int:
    return int(file.split("/")[-2])


def _texts(columns: dict) -> dict:
    return {name: repr(values) for name, values in columns.items()}


@pytest.mark.parametrize("seed", range(3))
def test_kept_and_fresh_rows_give_the_digest_of_reading_every_record(seed):
    rng = random.Random(seed)
    pool = _pool(rng)
    for _ in range(60):
        listed = sorted(rng.sample(range(len(pool)), rng.randint(0, len(pool))))
        files = [_file(i) for i in listed]
        keys = [(i, rng.choice([1, 2]), 0, i) for i in listed]  # a changed file: another modification time
        unreadable = {file for file in files if rng.random() < 0.1}
        kept_files = [_file(i) for i in sorted(rng.sample(range(len(pool)), rng.randint(0, len(pool))))]
        kept_rows = record_rows([pool[_index(f)] for f in kept_files], kept_files)
        kept_keys = [(_index(f), rng.choice([1, 2]), 0, _index(f)) for f in kept_files]
        names = [f[len(FOLDER) + 1 :] for f in kept_files]
        kept = digest_cache.Kept(names, kept_keys, kept_rows.columns, kept_rows.notable, kept_rows.tuned)
        kept = kept if rng.random() < 0.9 else None

        def read(paths: list[str], unreadable=unreadable):
            paths = [p for p in paths if p not in unreadable]
            return record_rows([pool[_index(p)] for p in paths], paths)

        found = Identities(keys, TAKEN_NS)
        plan = digest_cache.plan(FOLDER, files, found, kept)
        unread = [files[p] for p in plan.unread]
        split = rng.randint(0, len(unread))
        rows, new_kept = plan.assemble([read(unread[:split]), read(unread[split:])], read)

        # Every listed file but those read and unreadable, each its record (a kept identity: the same file).
        expected_files = [f for p, f in enumerate(files) if p in plan.kept_rows or f not in unreadable]
        whole = digest([pool[_index(f)] for f in expected_files])
        got = rows.digest()
        assert rows.files == expected_files
        assert _texts(got.columns) == _texts(whole.columns)
        assert [r.point_id for r in got.notable] == [r.point_id for r in whole.notable]
        if new_kept is not None:  # the next report, nothing changed: only the unreadable files are read
            again = digest_cache.plan(FOLDER, files, found, new_kept)
            assert {files[p] for p in again.unread} == set(files) - set(expected_files)
            rows_again, kept_again = again.assemble([read([])], read)
            assert kept_again is None and rows_again.files == expected_files
            assert _texts(rows_again.digest().columns) == _texts(whole.columns)


def test_a_file_changed_just_before_its_stat_is_kept_without_its_identity():
    record = make_record(nodes=1)
    files = [_file(1), _file(2)]
    second = 1_000_000_000
    keys = [(10, 5 * second, 5 * second, 1), (10, 9 * second + 7, 9 * second + 7, 2)]  # changed at 5 s and 9 s
    found = Identities(keys, 9 * second + digest_cache.RACY_NS)  # statted just after the second
    rows, kept = digest_cache.plan(FOLDER, files, found, None).assemble([record_rows([record, record], files)], None)
    assert len(rows) == 2 and kept.names == ["001/result.json", "002/result.json"]
    assert kept.keys == [keys[0], None]  # read again by the next report
    whole_seconds = [(10, 5 * second, 5 * second, 1), (10, 8 * second, 8 * second, 2)]  # a file system of seconds
    found = Identities(whole_seconds, 9 * second + digest_cache.RACY_NS)
    _, kept = digest_cache.plan(FOLDER, files, found, None).assemble([record_rows([record, record], files)], None)
    assert kept.keys == [whole_seconds[0], None]  # within 2 s: it may change again within the same second
