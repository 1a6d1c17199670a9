"""What `fsdp-bench sweep` prints and writes for people: its heading, the outcome (points skipped,
job files rendered, the table), the closing summary, and the report in the sweep folder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from reports.console import sweep_overhead_line, sweep_table
from reports.plan import autotune_lines
from reports.report.breakdown import record_lines as breakdown_lines


def heading_lines(sweep) -> list[str]:
    """Before anything runs: the autotuned ranking, if any, and where the sweep's records go."""
    lines = autotune_lines(sweep.autotuned) if sweep.autotuned else []
    repeats = sweep.settings.repeats
    return [*lines, f"sweep {sweep.name}: {len(sweep.points)} point(s) x {repeats} repeat(s) -> {sweep.folder}"]


def ranked_lines(line: str, ranked) -> list[str]:
    """An autotuned sweep's preflight decided the ranking: its line, then the new ranking, if any."""
    return [line, *(autotune_lines(ranked) if ranked is not None else [])]


def outcome_lines(outcome) -> list[str]:
    """Points the ledger skipped, job files rendered instead of run, the table of every record and
    the profiled points' split."""
    lines = [f"  skipped {decision.spec.point_id}: {decision.reason}" for decision in outcome.skipped]
    if outcome.rendered:
        lines.append(f"{len(outcome.rendered)} job file(s) rendered, nothing ran (launcher.apply=false):")
        lines += [f"  {path}" for path in outcome.rendered]
    if outcome.records:
        lines.append(sweep_table(outcome.records))
        lines += breakdown_lines(outcome.records)
    return lines


def summary_lines(outcome, name: str) -> list[str]:
    """The closing lines: how many points are ok, the wall time, the harness's overhead."""
    if outcome.interrupted:
        return [f"interrupted: {len(outcome.ran)} point(s) recorded in this run; run the same command to continue"]
    n_bad = sum(r.status != "ok" for r in outcome.records)
    lines = [f"sweep {name}: {len(outcome.records) - n_bad} ok, {n_bad} not ok, wall {outcome.wall_s:.1f} s"]
    if line := sweep_overhead_line(outcome.records, outcome.ran, outcome.wall_s):
        lines.append(line)
    return lines


def write_sweep_report(records, results_dir: Path, name: str, overrides: list[str]) -> Path:
    """The sweep's report in `<results_dir>/<name>/report/`, with the command that reproduces it and
    the sweep's preflights (one that cannot be read is named on stderr)."""
    from bench.analysis.preflight import load_preflights
    from bench.schema.protocol import point_dir
    from reports.report.build import write_report

    command = "fsdp-bench sweep " + " ".join(shlex.quote(o) for o in overrides)
    dirs = {(r.sweep, r.point_id): point_dir(results_dir, r.spec) for r in records}
    preflights, unreadable = load_preflights(results_dir / name)
    for path, reason in unreadable:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    return write_report(
        records, results_dir / name / "report", reproduce=[command.strip()], point_dirs=dirs, preflights=preflights
    )
