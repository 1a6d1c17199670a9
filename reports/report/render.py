"""Build and PNG-encode every figure, in worker processes that can start before there is data.

Drawing is most of a big report's presentation time and the figures are independent, so they are
drawn in parallel by forked workers. The `report` command starts them before it reads the records
(`FigureWorkers.start`): while the parent reads and analyses on one core, the first worker imports
matplotlib and draws a throw-away figure (fonts and PNG encoder loaded) on another, then forks the
rest from its warm self, so matplotlib is imported once and never in the parent. The frames arrive
later over a pipe, without the columns no figure reads: the records' frame as soon as it is built
(`submit_records`: the figures that read nothing else, plots.RECORD_FIGURES, are drawn first, while
the parent still aggregates), the scaling frame as soon as it is built (`submit_scaling`: the
figures of plots.SCALING_FIGURES, while each point still gets its series), then the points frame
(`submit`). One task is not a figure: results.csv's lines of the records' columns, formatted by the
worker that takes it (after the records' frame's figures) and sent when it has drawn its last figure.
The parent writes the tables and summary while they draw, and `collect` gathers the PNGs in report
order and the lines.

One core, platforms without fork, and processes running other threads (fork would copy their
locks mid-use) draw serially in the parent at `collect`; the PNGs are byte-identical either way.
A worker that dies or fails has its figures drawn in the parent instead, so the report is whole.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import traceback
from collections.abc import Iterator

import pandas as pd

from bench.analysis.forking import Sending, can_fork, cpus, shut_down
from bench.analysis.report.export import CsvRows, csv_rows
from bench.analysis.report.frame import LIST_COLUMNS
from reports.report.html import RenderedFigure

# Below this many points, drawing serially takes a second or two: not worth starting workers late
# (a command that starts them early, before the records are read, gets them whatever the size).
PARALLEL_MIN_POINTS = 1000
# More workers than this wait on each other more than they draw (there are eight figures).
MAX_WORKERS = 4
# How much the workers yield the CPU to the parent (os.nice): with the parent, the `report` command's
# reader and the workers on two cores, the parent, whose results every figure and table waits for,
# would otherwise get half a core or less while the workers import matplotlib and draw.
WORKER_NICENESS = 10
# A worker's last message: (_DONE, how many figures there are).
_DONE = "done"
# What the parent sends, in this order: (_RECORDS, records' frame) where it can, (_SCALING, scaling
# frame), (_POINTS, points frame).
_RECORDS, _SCALING, _POINTS = "records", "scaling", "points"
# The one task that is not a figure, taken after the figures of the records' frame: results.csv's lines
# for the records' own columns (export.csv_rows), formatted while the parent still aggregates; the
# worker that formatted them sends (_CSV_ROWS, rows) before it says it is done, and the parent adds
# the analysis' columns to each line (export.write_csv `leading`). Alone at the end of the report,
# in the parent, they took 0.2-0.3 s.
_CSV_ROWS = "results.csv rows"
# Big scaling frames carry per-cell bootstrap samples and key tuples that no figure reads:
# left out of what is pickled to the workers (tens of MB at 10,000 points).
_NOT_DRAWN = ("step_boot", "step_runs", "point_ids", "weak_key", "strong_key")


def figure_names() -> list[str]:
    """Every figure the report may draw, in report order (reports/report/plots.py FIGURES)."""
    from reports.report.plots import FIGURES

    return list(FIGURES)


def draw_order() -> list[str]:
    """The order the workers take the figures in: those drawn from the records' frame alone first
    (they can start before the analysis is done), then those of the scaling frame alone (before each
    point has its series), then the rest, each group in report order."""
    from reports.report.plots import RECORD_FIGURES, SCALING_FIGURES

    names = figure_names()
    first, then = [n for n in names if n in RECORD_FIGURES], [n for n in names if n in SCALING_FIGURES]
    return first + then + [n for n in names if n not in first and n not in then]


def draw(points: pd.DataFrame, scaling: pd.DataFrame, name: str) -> RenderedFigure | None:
    """One figure as PNG, or None when the report has nothing to show for it."""
    from reports.report.html import render_figure
    from reports.report.plots import FIGURES

    caption, build = FIGURES[name]
    fig = build(points, scaling)
    return None if fig is None else render_figure(name, caption, fig)


class FigureWorkers:
    """Figure-drawing processes: `start` (early, no data), `submit` the frames, `collect` the PNGs."""

    def __init__(self, conns: list[multiprocessing.connection.Connection], pid: int | None) -> None:
        self._conns, self._pid = conns, pid
        # Each worker's message being sent: the records' frame is megabytes, which a worker still
        # importing matplotlib takes only when it is done; this process aggregates meanwhile.
        self._sending: list[Sending | None] = [None] * len(conns)
        self._frames: tuple[pd.DataFrame, pd.DataFrame] | None = None
        self._scaling: pd.DataFrame | None = None  # what submit_scaling sent
        self._collected = False
        # results.csv's lines of the records' columns (export.csv_rows), once a worker sent them.
        self.csv_rows: CsvRows | None = None

    @classmethod
    def start(cls, workers: int | None = None) -> FigureWorkers:
        """Fork the workers now (`workers`: None picks one per CPU, at most MAX_WORKERS); with one
        worker or where forking is unsafe, none start and `collect` draws in this process."""
        count = min(cpus() if workers is None else workers, MAX_WORKERS)
        if count < 2 or not can_fork():
            return cls([], None)
        # The next figure to draw, shared by the workers: whoever is free takes the next one.
        next_figure = multiprocessing.get_context("fork").Value("i", 0)
        pairs = [multiprocessing.Pipe(duplex=True) for _ in range(count)]
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a pids limit, no memory): the parent draws at collect
            for conn in (end for pair in pairs for end in pair):
                conn.close()
            return cls([], None)
        if pid == 0:  # the first worker: warms up, forks the others, serves, never returns
            status = 1
            try:
                _yield_to_parent()
                for parent_end, _ in pairs:
                    parent_end.close()
                _serve_all([child_end for _, child_end in pairs], next_figure)
                status = 0
            finally:
                os._exit(status)
        for _, child_end in pairs:
            child_end.close()
        return cls([parent_end for parent_end, _ in pairs], pid)

    def submit_records(self, frame: pd.DataFrame) -> None:
        """Hand the records' frame (bench/analysis/report/frame.py, before any aggregation) to every
        worker: they draw plots.RECORD_FIGURES from it at once, and the one that takes the task formats
        results.csv's lines of its columns (`csv_rows` after `collect`). Optional; returns without
        waiting."""
        # Each point's step times: read by no figure of this frame, nor by results.csv (a tenth of the
        # pickle, most of the time to pickle and unpickle it).
        self._send((_RECORDS, _drawn_columns(frame, also=LIST_COLUMNS)))

    def submit_scaling(self, scaling: pd.DataFrame) -> None:
        """Hand the scaling frame (bench/analysis/report/aggregate.py, before the points have their
        series) to every worker: they draw plots.SCALING_FIGURES from it at once. Optional; returns
        without waiting."""
        self._send((_SCALING, _drawn_columns(scaling)))
        self._scaling = scaling

    def submit(self, points: pd.DataFrame, scaling: pd.DataFrame) -> None:
        """Hand the frames to every worker (they start drawing at once; the scaling frame only where
        `submit_scaling` did not); returns without waiting."""
        if self._scaling is None:
            self.submit_scaling(scaling)
        elif scaling is not self._scaling:  # the workers draw from the frame they have
            raise ValueError("submit: a scaling frame other than the one submit_scaling sent")
        self._frames = (points, scaling)
        # Where no records' frame was sent (workers started late), the worker that takes results.csv's
        # lines formats them from this frame, every column of the file.
        self._send((_POINTS, _drawn_columns(points)))

    def _send(self, message: tuple) -> None:
        if not self._conns:
            return
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        for index, conn in enumerate(self._conns):  # each after the one before on its pipe, without waiting:
            # to a dead worker nothing is sent (the others, or the parent at collect, draw its share)
            self._sending[index] = Sending(conn, payload, after=self._sending[index])

    def collect(self) -> list[RenderedFigure]:
        """Every figure that has data, in report order (waits for the workers, then stops them: they
        end by themselves, and `close` reaps them later, without waiting for their exit here); then
        `csv_rows` holds the lines a worker formatted of the records' frame, where one did."""
        assert self._frames is not None, "collect before submit"
        try:
            done = dict(self._receive())
            self._collected = True
        finally:
            self._stop()
        if not self._complete(done):  # serial, or a worker died: the parent draws what is missing
            points, scaling = self._frames
            for index, name in enumerate(figure_names()):
                if index not in done:
                    done[index] = draw(points, scaling, name)
        return [figure for _, figure in sorted(done.items()) if figure is not None]

    def _receive(self) -> Iterator[tuple[int, RenderedFigure | None]]:
        """(figure index, figure) until every worker has said it is done (or died); results.csv's lines
        into `csv_rows` as they come."""
        busy = list(self._conns)
        self._totals: list[int | None] = []
        while busy:
            for conn in multiprocessing.connection.wait(busy):
                try:
                    message = conn.recv()
                except (EOFError, OSError):  # the worker died: its figure is drawn at collect
                    message = None
                if message is None or message[0] == _DONE:
                    self._totals.append(None if message is None else message[1])
                    busy.remove(conn)
                    continue
                if message[0] == _CSV_ROWS:
                    self.csv_rows = message[1]
                    continue
                index, name, figure, error = message
                if error is not None:
                    raise RuntimeError(f"drawing the {name} figure failed in a worker process:\n{error}")
                yield index, figure

    def _complete(self, done: dict[int, RenderedFigure | None]) -> bool:
        """Every worker said it was done and how many figures there are, and each one came back."""
        totals = getattr(self, "_totals", [])
        return bool(totals) and None not in totals and len(done) == totals[0]

    def close(self) -> None:
        """Stop the workers (closing their pipes ends them) and reap the first (which reaps the rest).

        Before `collect` (the command failed, or found no records) the first worker may still be
        importing matplotlib: it is killed rather than waited for; siblings it forked see their pipe
        close and end by themselves. Each pipe is shut down before it is closed: a message still being
        sent on its own thread ends there, rather than write to a number a later file may reuse."""
        self._stop()
        if self._pid is not None:
            os.waitpid(self._pid, 0)
            self._pid = None

    def _stop(self) -> None:
        """close() without the reaping: the workers end (or were killed), nothing is waited for."""
        if self._pid is not None and not self._collected:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        for conn in self._conns:
            shut_down(conn)
        for sending in self._sending:
            if sending is not None:
                sending.done()
        for conn in self._conns:
            conn.close()
        self._conns, self._sending = [], []

    def __enter__(self) -> FigureWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def render_figures(points: pd.DataFrame, scaling: pd.DataFrame, workers: int | None = None) -> list[RenderedFigure]:
    """Every figure that has data, in report order. `workers`: None picks by size and CPUs."""
    workers = _default_workers(len(points)) if workers is None else workers
    with FigureWorkers.start(workers) as renderer:
        renderer.submit(points, scaling)
        return renderer.collect()


def _serve_all(conns: list[multiprocessing.connection.Connection], next_figure) -> None:
    """The first worker: import and warm matplotlib once, fork one sibling per further pipe, serve."""
    _warm_up()
    children = []
    for index in range(1, len(conns)):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                for other in conns[:index] + conns[index + 1 :]:
                    other.close()
                _serve(conns[index], next_figure)
                status = 0
            finally:
                os._exit(status)
        children.append(pid)
        conns[index].close()
    try:
        _serve(conns[0], next_figure)
    finally:
        for pid in children:
            os.waitpid(pid, 0)


def _serve(conn: multiprocessing.connection.Connection, next_figure) -> None:
    """Take the next task (`_tasks`: a figure, or results.csv's lines) until none is left, waiting for the frames it is
    drawn from; send back (report index, name, figure, error) for each, then (_CSV_ROWS, lines) where
    this worker took that task, and (_DONE, number of figures) at the end."""
    received: dict[str, object] = {}
    names, order = figure_names(), _tasks()
    rows = None  # results.csv's lines, where this worker took that task
    while True:
        with next_figure.get_lock():
            position = next_figure.value
            next_figure.value += 1
        if position >= len(order):
            break
        name = order[position]
        try:
            while not (frames := _frames_for(name, received)):
                kind, frame = pickle.loads(conn.recv_bytes())
                received[kind] = frame
        except (EOFError, OSError):  # the parent finished (or failed) without submitting
            return
        if name == _CSV_ROWS:
            rows = _csv_rows(frames[0])
            continue
        try:
            reply = (names.index(name), name, draw(*frames, name), None)
        except Exception:  # reported to the parent, which raises it there
            reply = (names.index(name), name, None, traceback.format_exc())
        try:
            conn.send(reply)
        except OSError:  # the parent is gone
            return
    with contextlib.suppress(OSError):
        if rows is not None:  # sent last: the parent reads it when it collects, so no figure waits on it
            conn.send((_CSV_ROWS, rows))
        conn.send((_DONE, len(names)))
    conn.close()


def _tasks() -> list[str]:
    """What the workers take, in order: draw_order's figures, results.csv's lines after the figures of
    the records' frame (both can start before the analysis is done)."""
    from reports.report.plots import RECORD_FIGURES

    order = draw_order()
    records = sum(name in RECORD_FIGURES for name in order)  # draw_order puts them first
    return [*order[:records], _CSV_ROWS, *order[records:]]


def _csv_rows(frame: pd.DataFrame) -> CsvRows | None:
    """results.csv's lines of this frame's columns; None where they cannot be formatted so, or fail
    to (the parent formats the whole file then, and says why if it fails too)."""
    try:
        return csv_rows(frame)
    except Exception:
        return None


def _frames_for(name: str, received: dict[str, object]) -> tuple | None:
    """(points, scaling) to draw `name` from, out of what has arrived; None until enough has."""
    from reports.report.plots import RECORD_FIGURES, SCALING_FIGURES

    scaling = received.get(_SCALING)
    if name == _CSV_ROWS:  # the records' frame, or the points' where no records' frame is sent
        frame = received.get(_RECORDS, received.get(_POINTS))
        return None if frame is None else (frame,)
    if _POINTS in received:
        return received[_POINTS], scaling
    if name in SCALING_FIGURES and scaling is not None:
        return None, scaling
    if name in RECORD_FIGURES and _RECORDS in received:
        return received[_RECORDS], None
    return None


def _yield_to_parent() -> None:
    """Lower this worker's priority (its siblings inherit it): while the parent reads and aggregates
    the workers only wait or draw what is ready, and the parent's work is what everything else waits
    for; once the parent waits for the figures the workers have the CPUs to themselves anyway."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(WORKER_NICENESS)


def _warm_up() -> None:
    """Load what every figure needs before the data arrives: matplotlib, its fonts and the PNG encoder."""
    from matplotlib.figure import Figure

    from reports.report.html import render_figure

    fig = Figure(figsize=(1, 1))
    fig.add_axes((0.2, 0.2, 0.7, 0.7)).set_title("warm-up", y=1.0)
    render_figure("warm-up", "", fig)


def _drawn_columns(frame: pd.DataFrame, also: tuple[str, ...] = ()) -> pd.DataFrame:
    """The frame without the columns nothing drawn from it, nor results.csv, reads (_NOT_DRAWN, and `also`)."""
    return frame.drop(columns=[c for c in (*_NOT_DRAWN, *also) if c in frame.columns])


def _default_workers(n_points: int) -> int:
    return 1 if n_points < PARALLEL_MIN_POINTS else cpus()
