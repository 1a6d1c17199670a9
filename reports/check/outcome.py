"""What `fsdp-bench check` prints and writes: the sides and thresholds, the table (changed rows, or
every row), the hints and unmatched points, the verdict last; JUnit XML and a markdown summary."""

from __future__ import annotations

from pathlib import Path

from bench.analysis.check.gate import CheckOutcome
from reports.check.table import hidden_line, report_rows, text_table, verdict_line


def check_lines(outcome: CheckOutcome, *, all_rows: bool = False) -> list[str]:
    """The console lines of a comparison (`outcome.report` is set)."""
    report = outcome.report
    lines = [
        f"baseline: {outcome.baseline.source}  current: {outcome.current.source}",
        f"thresholds: {report.thresholds}" + ("" if outcome.gate_timings else " (timings not gating)"),
    ]
    rows = report_rows(report, compact=not all_rows)
    if rows:
        lines.append(text_table(rows))
    if not all_rows and hidden_line(report):
        lines.append(hidden_line(report))
    lines += [f"{verdict}: {hint}" for verdict, hint in report.verdict_hints]
    lines += [f"not in current results: {label}" for label in report.only_in_baseline]
    lines += [f"no baseline for: {label}" for label in report.only_in_current]
    lines.append(verdict_line(report))
    return lines


def write_outputs(outcome: CheckOutcome, *, junit: str | Path | None = None, summary: str | Path | None = None) -> None:
    """The files a CI job keeps: JUnit XML and the markdown summary, where asked for."""
    if junit:  # each writer imported only when asked for (xml.etree is a part of check's start)
        from reports.check.junit import write_junit

        write_junit(outcome.report, junit)
    if summary:
        from reports.check.summary import write_summary

        write_summary(outcome.report, summary, baseline=outcome.baseline.source, current=outcome.current.source)
