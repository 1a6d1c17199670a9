"""`fsdp-bench report RESULTS [-o OUT]`: render a results folder or store as HTML, PNG, Markdown and CSV.

Exit 0 when a report was written (unreadable records are listed on the page and on stderr),
2 when RESULTS does not exist or holds no readable record.
"""

from __future__ import annotations

import argparse
import gc
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.analysis.records import RecordProblem
    from bench.schema.record import RunResult

HELP = "Render the scaling report (report.html, *.png, summary.md, results.csv) of a results folder or store."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", metavar="RESULTS", help="a results folder (any level) or an fsdp-bench .sqlite store"
    )
    parser.add_argument("-o", "--out", default="report", help="output folder (default: report/)")
    parser.add_argument("--title", default=None, help="page title (default: the sweep names)")


def main(args: argparse.Namespace) -> int:
    # Loading builds one object graph per record and keeps them all: cyclic GC passes over
    # them would find nothing to free and cost a quarter of a 10,000-record load.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _report(Path(args.results), Path(args.out), args.title)
    finally:
        if was_enabled:
            gc.enable()


def _report(results: Path, out: Path, title: str | None) -> int:
    try:
        records, problems, point_dirs = load(results)
    except ValueError as exc:
        print(f"results: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"report: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    if not records:
        print(f"results: no readable result records in {results} ({len(problems)} unreadable)", file=sys.stderr)
        return 2
    reproduce = [f"fsdp-bench report {shlex.quote(str(results))} -o {shlex.quote(str(out))}"]
    preflights = load_preflights(results)
    page = write_report(
        records, out, title=title, problems=problems, reproduce=reproduce, point_dirs=point_dirs, preflights=preflights
    )
    ok = sum(r.status == "ok" for r in records)
    print(f"report: {page} ({len(records)} points: {ok} ok, {len(records) - ok} not ok)")
    return 0


def load(results: Path) -> tuple[list[RunResult], list[RecordProblem], dict[tuple[str, str], Path]]:
    """Records from a store file or a folder of result.json files (raises ValueError if neither),
    and each record's folder by (sweep, point id) where it has one (a store has none)."""
    from bench.analysis.records import load_located_records
    from bench.analysis.store import ResultStore, is_store

    if not results.exists():
        raise ValueError(f"no such file or folder: {results}")
    if is_store(results):
        return (*ResultStore(results).records(), {})
    if results.is_file() and results.suffix != ".json":
        raise ValueError(f"{results} is neither a results folder, a result.json nor an fsdp-bench store")
    located, problems = load_located_records(results)
    return [r for r, _ in located], problems, {(r.sweep, r.point_id): path.parent for r, path in located}


def load_preflights(results: Path) -> list:
    """The preflight records beside a results folder's points (reported as problems on stderr if unreadable)."""
    from bench.analysis.preflight import load_preflights as load_all

    found, problems = load_all(results)
    for path, reason in problems:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    return found


def write_report(
    records: Sequence[RunResult],
    out: Path,
    *,
    title: str | None = None,
    reproduce: Sequence[str] = (),
    problems: Sequence[RecordProblem] = (),
    point_dirs: dict[tuple[str, str], Path] | None = None,
    preflights: Sequence = (),
) -> Path:
    """bench.present.report.build.build_report of these records (the sweep calls this too).

    `reproduce`: the exact command lines that made these results (the sweep passes its own);
    the page adds one `fsdp-bench run` per configuration after them. `point_dirs`: each record's
    folder by (sweep, point id), for the telemetry timelines (bench.schema.protocol.point_dir for a sweep).
    """
    from bench.present.report.build import build_report
    from bench.run.ownership.storage import writing

    with writing(out):  # a full disk names the report's folder (bench/run/ownership/storage.py)
        return build_report(
            records,
            out,
            title=title,
            reproduce=reproduce,
            problems=[(str(p.path), p.reason) for p in problems],
            point_dirs=point_dirs,
            preflights=preflights,
        )
