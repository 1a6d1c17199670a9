"""The check as a markdown summary (for a CI job summary or a pull-request comment)."""

from __future__ import annotations

from pathlib import Path

from bench.analysis.check.compare import CheckReport
from bench.schema.files import write_text_atomic
from reports.check.table import HEADERS, hidden_line, report_rows, verdict_line


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def markdown_summary(report: CheckReport, *, baseline: str = "", current: str = "") -> str:
    """Heading with the outcome, the environment notes, the table, and the unmatched points."""
    lines = [f"## fsdp-bench check: {verdict_line(report)}", ""]
    if baseline or current:
        lines += [f"Baseline `{baseline}`, current `{current}`.", ""]
    lines += [f"Thresholds: {report.thresholds}.", ""]
    lines += [f"> {line}" for line in report.env_lines]
    if report.env_lines:
        lines.append("")
    rows = report_rows(report, compact=True)
    if hidden_line(report):
        lines += [hidden_line(report) + ".", ""]
    if rows:
        lines.append("| " + " | ".join(HEADERS) + " |")
        lines.append("|" + "---|" * len(HEADERS))
        lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
        lines.append("")
    lines += [f"{verdict[:1].upper()}{verdict[1:]}: {hint}." for verdict, hint in report.verdict_hints]
    if report.hints:
        lines.append("")
    if report.only_in_baseline:
        lines += ["Baseline points not in the current results: " + ", ".join(report.only_in_baseline), ""]
    if report.only_in_current:
        lines += ["Current points without a baseline: " + ", ".join(report.only_in_current), ""]
    return "\n".join(lines)


def write_summary(report: CheckReport, path: Path, *, baseline: str = "", current: str = "") -> None:
    """Write the markdown summary (parents created)."""
    write_text_atomic(path, markdown_summary(report, baseline=baseline, current=current))
