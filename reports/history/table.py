"""History as text rows: the series table, the change points newest first, numerics, the verdict.

Shared by the console, summary.md and history.html, so all three show the same numbers.
"""

from __future__ import annotations

import statistics

from bench.analysis.history.analyse import ChangePoint, History, NumericsIssue, SeriesResult
from bench.analysis.history.detect import MIN_SERIES_RUNS
from bench.analysis.history.links import LINK_HEADERS
from bench.analysis.history.ops import grown_ops
from bench.analysis.history.series import EFFICIENCY
from bench.analysis.stats import CONFIDENCE_PCT
from reports.check.table import format_value, text_table

SERIES_HEADERS = (
    "series", "metric", "runs", "first run", "latest run", "latest", "change points", "noise", "detects (95%)",
    "status",
)  # fmt: skip
CHANGE_HEADERS = (
    "first run after", "series", "metric", "before -> after", f"change [{CONFIDENCE_PCT}% CI]", "p", "runs before/after",
    "direction", "environment change",
)  # fmt: skip
NUMERICS_HEADERS = ("run", "series", "loss curve vs the run before")


def value(metric: str, number: float) -> str:
    """Tokens/s to 0.1, efficiency in percent, the rest to 4 significant digits (check's format)."""
    if metric == EFFICIENCY:
        return f"{number * 100:.1f}%"
    return format_value(metric, number)


def status(result: SeriesResult) -> str:
    """NEW REGRESSION / NUMERICS / too short / n change point(s) / no change."""
    if result.failing:
        kinds = {"NEW REGRESSION" if isinstance(item, ChangePoint) else "NUMERICS" for item in result.failing}
        return " + ".join(sorted(kinds))
    if result.too_short:
        return f"too short (< {MIN_SERIES_RUNS} runs): not tested"
    if result.not_gated:
        return f"not gated: {result.power.reason()}"
    if not result.changes:
        return "no change"
    latest = result.changes[-1]
    return f"last change: {latest.direction} {latest.change * 100:+.1f}% at run {latest.index + 1}"


def series_rows(history: History) -> list[list[str]]:
    rows = []
    for result in history.results:
        runs = result.series.runs
        rows.append(
            [
                result.series.label,
                result.series.metric,
                str(len(runs)),
                runs[0].name,
                runs[-1].name,
                value(result.series.metric, runs[-1].value),
                str(len(result.changes)),
                *power_cells(result),
                status(result),
            ]  # fmt: skip
        )
    return rows


def power_cells(result: SeriesResult) -> list[str]:
    """The series' noise per run and the smallest shift its gate detects with 95 % probability, in
    percent ("-" where unknown or too short)."""
    power = result.power
    if power is None:
        return ["-", "-"]
    noise = "-" if power.noise is None else f"{power.noise * 100:.1f}%"
    detects = "-" if power.detectable is None else f"{power.detectable * 100:.1f}%"
    return [noise, detects]


def not_gated_line(history: History) -> str:
    """The series the gate cannot vouch for, each with why and what would gate it ("" when none)."""
    if not history.not_gated:
        return ""
    names = "; ".join(f"{r.series.label} ({r.power.reason()})" for r in history.not_gated)
    return f"not gated at {history.target_shift * 100:g}% (a shift of that size would pass unseen): {names}"


def change_row(change: ChangePoint) -> list[str]:
    metric = change.series.metric
    interval = f"[{(change.ci_low - 1) * 100:+.1f}%, {(change.ci_high - 1) * 100:+.1f}%]"
    direction = change.direction.upper() if change.new and change.regression else change.direction
    return [
        change.run.name, change.series.label, metric,
        f"{value(metric, change.before)} -> {value(metric, change.after)}",
        f"{change.change * 100:+.1f}% {interval}", f"{change.pvalue:.2g}",
        f"{change.runs_before}/{change.runs_after}", direction + (" (new)" if change.new else ""),
        "; ".join([*change.environment, *filter(None, [split_change(change), ops_change(change)])])
        or "none recorded",
    ]  # fmt: skip


def ops_change(change: ChangePoint) -> str | None:
    """The operations that grew at a change point (bench.analysis.history.ops), over the runs the
    magnitude compares; None where a side has no profiled run."""
    runs = change.series.runs
    before = runs[change.index - change.runs_before : change.index]
    after = runs[change.index : change.index + change.runs_after]
    return grown_ops([r.record for r in before], [r.record for r in after])


def split_change(change: ChangePoint) -> str | None:
    """The profiled steps' split (metrics.step_breakdown, profile.enabled) before and after a change
    point, as shares of the step: each side's median over the runs the magnitude compares that have
    one; None where neither side has one."""
    runs = change.series.runs
    sides = (
        runs[change.index - change.runs_before : change.index],
        runs[change.index : change.index + change.runs_after],
    )
    shares = [_split_shares(side) for side in sides]
    if not any(shares):
        return None
    parts = []
    for part in ("compute", "exposed comm", "idle"):
        before, after = (f"{100 * s[part]:.0f}%" if s else "-" for s in shares)
        parts.append(f"{part} {before} -> {after}")
    return "step split: " + ", ".join(parts)


def _split_shares(runs) -> dict[str, float] | None:
    splits = [b for run in runs if (b := run.record.metrics.step_breakdown) is not None and b.step_s]
    if not splits:
        return None
    fields = {"compute": "compute_s", "exposed comm": "exposed_comm_s", "idle": "idle_s"}
    return {part: statistics.median((getattr(b, f) or 0.0) / b.step_s for b in splits) for part, f in fields.items()}


def change_rows(history: History) -> list[list[str]]:
    return [change_row(c) for c in history.changes]


def numerics_row(issue: NumericsIssue) -> list[str]:
    return [issue.run.name, issue.series.label, issue.verdict.describe() + (" (new)" if issue.new else "")]


def numerics_rows(history: History) -> list[list[str]]:
    return [numerics_row(n) for n in history.numerics_issues]


def verdict_line(history: History) -> str:
    """The one-line outcome printed last (and the summary's heading)."""
    tested = len(history.results) - len(history.too_short)
    counts = (
        f"{len(history.results)} series ({tested} tested, {len(history.too_short)} too short), "
        f"{len(history.changes)} change point(s), {len(history.numerics_issues)} numerics failure(s)"
    )
    if history.not_gated:
        counts += f"; {len(history.not_gated)} series not gated at {history.target_shift * 100:g}%"
    if history.window is None:
        return f"REPORT ({counts})"
    failing = len(history.failing)
    outcomes = [f"{failing} new regression(s) in the last {history.window} run(s)"] if failing else []
    outcomes += [f"{len(history.not_gated)} series not gated (--fail-on-ungated)"] if history.fails_ungated else []
    outcome = "FAIL: " + ", ".join(outcomes) if outcomes else "PASS"
    return f"{outcome} ({counts})"


def numerics_line(history: History) -> str:
    """How the numerics guard ran (or that it was skipped)."""
    if not history.numerics:
        return "numerics: skipped (--no-numerics)"
    checked = sum(r.numerics_checked for r in history.results)
    return f"numerics: {checked} loss curve(s) compared with the run before, {len(history.numerics_issues)} failed"


def console_lines(history: History, store: str) -> list[str]:
    """What `fsdp-bench history` prints: the series, the change points newest first, numerics, the
    series too short to test, the measured links, and the verdict last."""
    lines = [f"store: {store}  metric: {history.metric}  detector: {history.detector}"]
    lines.append(text_table(series_rows(history), SERIES_HEADERS))
    changes = change_rows(history)
    lines.append("\nchange points, newest first:" if changes else "\nno change point")
    if changes:
        lines.append(text_table(changes, CHANGE_HEADERS))
    lines.append(numerics_line(history))
    if history.numerics_issues:
        lines.append(text_table(numerics_rows(history), NUMERICS_HEADERS))
    if history.too_short:
        names = ", ".join(f"{r.series.label} ({len(r.series.runs)} runs)" for r in history.too_short)
        lines.append(f"too short to test (fewer than {MIN_SERIES_RUNS} runs): {names}")
    if history.not_gated:
        lines.append(not_gated_line(history))
    if history.slow_hosts:
        lines.append("\nhosts that keep being slow:")
        lines.extend(f"  {line}" for line in history.slow_hosts)
    if history.links:
        lines.append("\nmeasured links (preflights), oldest first:")
        lines.append(text_table(history.links, LINK_HEADERS))
    lines.append(verdict_line(history))
    return lines
