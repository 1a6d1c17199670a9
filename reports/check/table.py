"""The check's table (point, metric, baseline, current, change, verdict, confidence) as text rows.

Shared by the console output and the markdown summary so both show the same numbers.
"""

from __future__ import annotations

from bench.analysis.check.compare import CheckReport, Finding
from bench.schema.metrics import find

HEADERS = ("point", "metric", "baseline", "current", "change", "verdict", "confidence")


def format_value(metric: str, value: float | str | None) -> str:
    """A metric's value in the catalogue's format (bench/schema/metrics.py: counters as integers with
    separators, tokens/s to 0.1, other timings to 4 significant digits); a loss to 6 digits."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    definition = find(metric)
    if definition is not None:
        return definition.text(value)
    return f"{value:.6g}" if metric == "loss_curve" else f"{value:.4g}"


def format_verdict(finding: Finding) -> str:
    """The verdict, upper-cased when it fails the check, marked `(not gating)` when it would but does not."""
    if finding.fails:
        return finding.verdict.upper()
    if finding.verdict == "regression" and not finding.gating:
        return "regression (not gating)"
    return finding.verdict


def finding_row(finding: Finding) -> list[str]:
    change = "-" if finding.change is None else f"{finding.change * 100:+.2f}%"
    return [
        finding.point,
        finding.metric,
        format_value(finding.metric, finding.baseline),
        format_value(finding.metric, finding.current),
        change,
        format_verdict(finding),
        finding.confidence,
    ]


def is_routine(finding: Finding) -> bool:
    """An unchanged counter or a matching loss curve: left out of the compact table (JUnit keeps every finding)."""
    return finding.kind in ("counter", "numerics") and finding.verdict == "ok"


def report_rows(report: CheckReport, *, compact: bool = False) -> list[list[str]]:
    """One row per finding, failing rows first, then in point order; `compact` drops unchanged counters."""
    shown = [f for f in report.findings if not (compact and is_routine(f))]
    ordered = sorted(shown, key=lambda f: not f.fails)
    return [finding_row(f) for f in ordered]


def hidden_line(report: CheckReport) -> str | None:
    """What the compact table left out, in one line (None when nothing was)."""
    counters = sum(1 for f in report.findings if is_routine(f) and f.kind == "counter")
    curves = sum(1 for f in report.findings if is_routine(f) and f.kind == "numerics")
    parts = [f"{counters} counter(s) identical to the baseline"] if counters else []
    parts += [f"{curves} loss curve(s) matching it"] if curves else []
    return " and ".join(parts) + " (not listed)" if parts else None


def text_table(rows: list[list[str]], headers: tuple[str, ...] = HEADERS) -> str:
    """A plain aligned table (no colours: CI logs keep it readable)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def verdict_line(report: CheckReport) -> str:
    """The one-line outcome printed last (and used as the summary's heading)."""
    if report.exit_code == 2:
        return "NOTHING COMPARABLE: no current point matches a baseline point"
    failed = len(report.regressions)
    outcome = f"FAIL: {failed} regression(s)" if failed else "PASS"
    extra = ""
    if report.only_in_baseline or report.only_in_current:
        extra = f"; {len(report.only_in_baseline)} baseline point(s) not run, {len(report.only_in_current)} new"
    return f"{outcome} ({report.matched} point(s) compared, {len(report.findings)} metric(s){extra})"
