"""Which process read which records, for the tests of commands that share a folder's reading with a
forked worker (`check`'s, the report's): `count_reads(monkeypatch)` wraps
bench.analysis.records.read_records so that each call made in the test's own process appends how
many files it read, and a worker's call fails once the test asks it to. A module of its own, not
conftest (tests/bench_cli.py says why)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import bench.analysis.records as records


@dataclass
class Reads:
    """`here`: the number of files of each read_records call in this process, in order (a forked
    worker's are not counted); `fail_in_worker`: set it, and the worker's next calls raise MemoryError."""

    here: list[int] = field(default_factory=list)
    fail_in_worker: bool = False


def count_reads(monkeypatch) -> Reads:
    parent, read, reads = os.getpid(), records.read_records, Reads()

    def counted(paths):
        paths = list(paths)
        if os.getpid() == parent:
            reads.here.append(len(paths))
        elif reads.fail_in_worker:
            raise MemoryError("the worker fails while it reads")
        return read(paths)

    monkeypatch.setattr(records, "read_records", counted)
    return reads
