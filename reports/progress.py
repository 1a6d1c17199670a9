"""A live progress bar for sweeps (rich), silent when output is not a terminal."""

from __future__ import annotations

import sys
import time

from bench.schema.labels import point_label as short_label
from bench.schema.record import RunResult


class SweepProgress:
    """Points done and failed, the current point, elapsed time and ETA."""

    def __init__(self, total: int, enabled: bool | None = None) -> None:
        self.total, self.done, self.failed = total, 0, 0
        self.started = time.monotonic()
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self._progress = None
        self._task = None

    def __enter__(self) -> SweepProgress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("failed {task.fields[failed]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("sweep", total=self.total, failed=0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress:
            self._progress.stop()

    def running(self, label: str) -> None:
        if self._progress:
            self._progress.update(self._task, description=f"running {label}")

    def finished(self, record: RunResult) -> None:
        self.done += 1
        self.failed += record.status != "ok"
        if self._progress:
            self._progress.update(self._task, advance=1, failed=self.failed)
        else:
            tps = record.metrics.tokens_per_s
            print(
                f"[{self.done}/{self.total}] {record.point_id} {point_label(record)} {record.status}"
                + (f" {tps:,.0f} tokens/s" if tps else "")
                + (f" ({record.error})" if record.error else ""),
                flush=True,
            )


def point_label(record: RunResult) -> str:
    return short_label(record.spec) + (f" r{record.spec.repeat}" if record.spec.repeat else "")
