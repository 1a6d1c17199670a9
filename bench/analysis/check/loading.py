"""A results folder's side of a check, read by two processes at once.

Reading and validating the records of a big results folder is most of what `check` does before it
compares, and every record is read alone. So the command forks a worker first thing
(bench/analysis/forking.py), before either process imports the record schema: the worker
finds the folder's files (`file_texts_named`), sends their list, then reads the later share of them and
summarizes it (bench/analysis/check/points.py `summarize_runs`: what the points need of them,
small enough to send, where the records would cost as much to pickle as to validate again), while
this process imports what it compares with, reads the baseline and then its own share of the
files, summarized once the worker's batch is in (knowing the worker's specs, it computes no
identity twice); the points are made from both batches in file order (`points_from_batches`), the
same points one process makes. The worker then imports the statistics and shares the comparison
(compare.py). A side that is not a folder (a baseline file, a store, one result.json) is read here
(`load_side`), as is everything with one CPU or where forking is unsafe; a folder of fewer than
`PARALLEL_MIN_RECORDS` files is read here too, but for its list, and the worker is then stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.analysis.forking import Worker

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bench.analysis.check.baseline import Side
    from bench.analysis.check.points import RunBatch
    from bench.analysis.records import RecordProblem

# Below this many records one process reads them in well under a second: the worker reads none.
PARALLEL_MIN_RECORDS = 1000
# The share of the files this process reads itself: it also imports the comparison's modules and
# reads the baseline meanwhile, so the worker takes the larger share (docs/results/checks.md).
OWN_SHARE = 0.6
# What the worker imports once it has read its share: the comparison it is given next (compare.py).
COMPARING = ("bench.analysis.stats", "numpy")


class SideLoader:
    """A side being read: `start` (forks the worker), then `side()` (this process's share, then the
    worker's); `close` stops the worker."""

    def __init__(self, path: Path, worker: Worker | None = None) -> None:
        self._path, self._worker = path, worker

    @classmethod
    def start(cls, path: Path | str) -> SideLoader:
        """Fork the worker on a results folder now (where it may fork); nothing starts for another side."""
        path = Path(path)
        return cls(path, Worker.start(_list_and_read, path, then_import=COMPARING) if path.is_dir() else None)

    @property
    def worker(self) -> Worker | None:
        """The worker, for the comparison (None: there is none, or it is gone)."""
        return self._worker if self._worker is not None and self._worker.running else None

    def side(self) -> Side:
        """The whole side: BaselineError where it cannot be read, as load_side."""
        from bench.analysis.check.baseline import load_side, side_of_points
        from bench.analysis.check.points import points_from_batches, summarize_runs
        from bench.analysis.records import file_texts_named, read_records
        from bench.schema.protocol import RESULT_FILE

        if self.worker is None:
            return load_side(self._path)
        files = self._worker.result(lambda: file_texts_named(self._path, RESULT_FILE))
        split = own_share(len(files))
        if split == len(files):  # a small folder: nothing for the worker to read, nor to import for
            self._worker.close()  # comparisons too few to share (timings.py): stopped, it costs no CPU
        own, own_problems = read_records(files[:split])
        their_batch, their_problems = self._worker.result(lambda: _read(files[split:]))
        # Summarized knowing the worker's specs: most points have runs in both shares, and their
        # identities need not be computed twice.
        own_batch = summarize_runs((record for record, _ in own), known=their_batch)
        points = points_from_batches([own_batch, their_batch])
        return side_of_points(points, own_problems + their_problems, source=str(self._path))

    def close(self) -> None:
        """Stop the worker (reaped; killed if it still works)."""
        if self._worker is not None:
            self._worker.close()


def own_share(files: int) -> int:
    """How many of a folder's files (the first ones) this process reads: all of a small folder."""
    return files if files < PARALLEL_MIN_RECORDS else round(files * OWN_SHARE)


def _list_and_read(path: Path) -> Iterator[object]:
    """The worker's task: the folder's result files (as texts: a fraction of the cost of sending
    Paths), then the summary of its share of them."""
    from bench.analysis.records import file_texts_named
    from bench.schema.protocol import RESULT_FILE

    files = file_texts_named(path, RESULT_FILE)
    yield files
    yield _read(files[own_share(len(files)) :])


def _read(paths: list[str]) -> tuple[RunBatch, list[RecordProblem]]:
    """These files' records summarized, and the problems of those that could not be read."""
    from bench.analysis.check.points import summarize_runs
    from bench.analysis.records import read_records

    located, problems = read_records(paths)
    return summarize_runs(record for record, _ in located), problems
