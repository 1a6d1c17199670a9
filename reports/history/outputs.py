"""History as summary.md (a CI job summary) and JUnit XML (check's writer, one testcase per series).

JUnit: a series with a new regression or a new numerics failure is a <failure>; a series too short
to test, or too noisy for the gate to detect --target-shift (not gated), is <skipped> with the reason
(listed, never silently passed; a <failure> with --fail-on-ungated); every other series passes with
its change points in <system-out>.
"""

from __future__ import annotations

from pathlib import Path

from bench.analysis.check.compare import NOT_GATED, CheckReport, Finding
from bench.analysis.history.analyse import ChangePoint, History, SeriesResult
from bench.analysis.history.detect import MIN_SERIES_RUNS
from bench.analysis.history.links import LINK_HEADERS
from bench.schema.files import write_text_atomic
from reports.check.junit import write_junit
from reports.history.table import (
    CHANGE_HEADERS,
    NUMERICS_HEADERS,
    change_row,
    change_rows,
    not_gated_line,
    numerics_line,
    numerics_rows,
    verdict_line,
)

SUITE_NAME = "fsdp-bench history"


def _series_findings(result: SeriesResult, fails_ungated: bool = False) -> list[Finding]:
    series = result.series
    label, metric = series.label, series.metric
    findings = []
    for item in result.failing:
        if isinstance(item, ChangePoint):
            row = change_row(item)
            detail = f"first run after: {row[0]}; {row[4]}; p={row[5]}; runs {row[6]}; environment: {row[8]}"
            findings.append(
                Finding(label, metric, "timing", item.before, item.after, item.change, "regression", detail)
            )
        else:
            verdict = item.verdict
            detail = f"run {item.run.name}: {verdict.describe()}"
            findings.append(
                Finding(
                    label, "loss_curve", "numerics", verdict.baseline, verdict.current, None, verdict.verdict, detail
                )
            )
    if findings:
        return findings
    if result.too_short:
        note = f"{len(series.runs)} run(s) < {MIN_SERIES_RUNS}: too short to test"
        return [Finding(label, metric, "timing", None, None, None, "insufficient", note, gating=False, hint=note)]
    if result.not_gated:
        # A <skipped> case with the reason, or a <failure> when --fail-on-ungated makes it fail the gate.
        note = f"{len(series.runs)} runs, not gated: {result.power.reason()}"
        return [Finding(label, metric, "timing", None, None, None, NOT_GATED, note, gating=fails_ungated, hint=note)]
    last = series.runs[-1].value
    note = f"{len(series.runs)} runs, {len(result.changes)} change point(s), none new and worse"
    return [Finding(label, metric, "timing", series.runs[0].value, last, None, "ok", note)]


def check_report(history: History) -> CheckReport:
    """The history in check's report shape (what its JUnit writer takes)."""
    findings = [f for result in history.results for f in _series_findings(result, history.fails_ungated)]
    return CheckReport(findings=findings, matched=len(history.results), thresholds=history.detector)


def write_history_junit(history: History, path: Path) -> None:
    write_junit(check_report(history), path, SUITE_NAME)


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def _table(headers: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows] + [""]


def markdown_summary(history: History, *, store: str = "") -> str:
    """Heading with the outcome, the change points newest first, numerics failures, short series."""
    lines = [f"## fsdp-bench history: {verdict_line(history)}", ""]
    lines += [f"Store `{store}`, metric `{history.metric}`, detector {history.detector}.", ""]
    if history.window is not None:
        lines += [f"Gate: a change for the worse among the last {history.window} run(s) of a series fails.", ""]
    changes = change_rows(history)
    lines += _table(CHANGE_HEADERS, changes) if changes else ["No change point.", ""]
    lines += [numerics_line(history) + ".", ""]
    if history.numerics_issues:
        lines += _table(NUMERICS_HEADERS, numerics_rows(history))
    if history.too_short:
        names = ", ".join(f"{r.series.label} ({len(r.series.runs)} runs)" for r in history.too_short)
        lines += [f"Too short to test (fewer than {MIN_SERIES_RUNS} runs): {names}.", ""]
    if history.not_gated:
        line = not_gated_line(history)
        lines += [line[:1].upper() + line[1:] + ".", ""]
    if history.slow_hosts:
        lines += ["Hosts that keep being slow:", ""] + [f"- {line}" for line in history.slow_hosts] + [""]
    if history.links:
        lines += ["Measured links (preflights), oldest first:", ""] + _table(LINK_HEADERS, history.links)
    return "\n".join(lines)


def write_summary(history: History, path: Path, *, store: str = "") -> None:
    write_text_atomic(path, markdown_summary(history, store=store))
