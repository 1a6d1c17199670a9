"""summary.md: the report's headline in Markdown, for CI job summaries and pull requests.

Cells are escaped for GitHub-flavoured Markdown (which passes some HTML through): a record's
error text can never inject markup or break a table row.
"""

from __future__ import annotations

import html

from bench.analysis.report.contention import SUPERLINEAR_MARGIN
from reports.report.tables import Table

# A CI summary is read at a glance: the full list lives in report.html and results.csv.
MAX_FAILED_ROWS = 20


def escape_cell(text: str) -> str:
    """HTML-escape and neutralise the Markdown table separators and line breaks."""
    return html.escape(str(text)).replace("|", "\\|").replace("\n", " ").replace("`", "&#96;")


def markdown_table(table: Table, max_rows: int | None = None) -> list[str]:
    rows = table.rows if max_rows is None else table.rows[:max_rows]
    lines = ["| " + " | ".join(escape_cell(c) for c in table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(escape_cell(c) for c in row) + " |" for row in rows]
    if max_rows is not None and len(table.rows) > max_rows:
        lines.append(f"\n... and {len(table.rows) - max_rows} more (see report.html).")
    return lines


def render_summary(
    title: str,
    environment: list[tuple[str, str]],
    headline: Table,
    scaling: Table,
    failed: Table,
    flagged: Table,
    telemetry_flagged: Table | None = None,
    contention: Table | None = None,
    breakdown: Table | None = None,
) -> str:
    """The Markdown text: environment, headline, scaling series, suspect efficiencies (contention),
    points below prediction, points that throttled or left a device idle, where each profiled point's
    step went, then what failed."""
    lines = [f"# {escape_cell(title)}", ""]
    lines += [f"- **{escape_cell(label)}**: {escape_cell(value)}" for label, value in environment]
    lines += ["", "## Best configuration per model and node count", ""]
    lines += markdown_table(headline) if headline.rows else ["No point finished ok."]
    if scaling.rows:
        lines += ["", "## Scaling series", ""] + markdown_table(scaling)
    if contention is not None and contention.rows:
        count = len(contention.rows)
        lines += ["", f"**{count} point(s) with a suspect scaling efficiency (contention): more than "
                  f"{SUPERLINEAR_MARGIN * 100:.0f} points above 100 % or an interval above it, or measured on a "
                  "loaded or shared host.**", ""]  # fmt: skip
        lines += markdown_table(contention, MAX_FAILED_ROWS)
    if flagged.rows:
        count = len(flagged.rows)
        lines += ["", f"**{count} point(s) scaled more than 10 points below the planner's prediction.**", ""]
        lines += markdown_table(flagged, MAX_FAILED_ROWS)
    if telemetry_flagged is not None and telemetry_flagged.rows:
        count = len(telemetry_flagged.rows)
        lines += ["", f"**{count} point(s) throttled or left a device mostly idle (telemetry).**", ""]
        lines += markdown_table(telemetry_flagged, MAX_FAILED_ROWS)
    if breakdown is not None and breakdown.rows:
        lines += ["", "## Where the step went (profiled points)", ""] + markdown_table(breakdown)
    lines += ["", f"## Failed and skipped points ({len(failed.rows)})", ""]
    lines += markdown_table(failed, MAX_FAILED_ROWS) if failed.rows else ["None: every point finished ok."]
    return "\n".join(lines) + "\n"
