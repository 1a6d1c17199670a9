"""build_report: records in, OUT/report.html + OUT/*.png + OUT/summary.md + OUT/results.csv out.

The one entry point the `report` and `sweep` commands call. Pure pipeline: records ->
frame -> cells -> scaling series -> figures and tables -> files.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench.schemas import PreflightResult, RunResult
from reports import tables
from reports.analysis import analyse
from reports.checkpoint import checkpoint_table
from reports.cluster_health import cluster_health
from reports.environment import environment_lines
from reports.export import write_csv
from reports.html import RenderedFigure, render_html
from reports.render import render_figures
from reports.reproduce import default_commands
from reports.summary_md import render_summary


def build_report(
    records: Iterable[RunResult],
    out_dir: Path | str = "report",
    *,
    title: str | None = None,
    reproduce: Sequence[str] | None = None,
    problems: Sequence[tuple[str, str]] = (),
    preflights: Sequence[PreflightResult] = (),
) -> Path:
    """Write the report of `records` into `out_dir`; returns the path of report.html.

    `reproduce`: the exact commands that produced the results (the sweep passes its own
    command line); one `fsdp-bench run` per configuration follows them. `problems`: (file,
    reason) pairs of records that could not be read, listed on the page. `preflights`: the
    results' preflight records, drawn in the cluster health section.
    """
    with _gc_paused():
        return _build(list(records), Path(out_dir), title, reproduce, problems, preflights)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic GC while rendering: with 10,000 records alive, each full collection walks
    millions of objects, and matplotlib's many small allocations trigger one every few ms
    (a quarter of the render time). Rendering creates little cyclic garbage."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _build(
    records: Iterable[RunResult],
    out: Path,
    title: str | None,
    reproduce: Sequence[str] | None,
    problems: Sequence[tuple[str, str]],
    preflights: Sequence[PreflightResult],
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    analysis = analyse(records)
    points = analysis.points
    title = title or _default_title(points)
    figures = render_figures(points, analysis.scaling)
    health = cluster_health(preflights, records)
    for figure in [*figures, *health.figures]:
        (out / f"{figure.name}.png").write_bytes(figure.png)
    environment = environment_lines(points)
    headline, scaling = tables.headline_table(analysis.scaling), tables.scaling_table(analysis.scaling)
    failed = tables.failed_table(points)
    commands = [*(reproduce or []), "# each configuration alone:", *default_commands(points)]
    context = {
        "title": title,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "environment": environment,
        "headline": headline,
        "scaling": scaling,
        "figures": figures,
        "plot_notes": _plot_notes(figures, points),
        "results": tables.results_table(points),
        "checkpoints": checkpoint_table(points),
        "failed": failed,
        "problems": tables.problems_table(list(problems)),
        "reproduce": commands,
        "has_prediction": tables.has_prediction(points),
        "health": health,
    }
    (out / "report.html").write_text(render_html(context), encoding="utf-8")
    summary = render_summary(title, environment, headline, scaling, failed, tables.flagged_table(points))
    (out / "summary.md").write_text(summary, encoding="utf-8")
    write_csv(points, out / "results.csv")
    return out / "report.html"


def _default_title(points: pd.DataFrame) -> str:
    sweeps = sorted(points["sweep"].dropna().unique())
    name = ", ".join(sweeps[:3]) + (f" and {len(sweeps) - 3} more" if len(sweeps) > 3 else "")
    return f"fsdp-bench report: {name or 'no records'}"


_PLOT_NOTES = {
    "throughput": "No point finished ok, so there is nothing to plot.",
    "mfu": "MFU is not plotted: no point has one (MFU is null for devices without a published peak, e.g. CPUs).",
    "memory": "Peak memory is not plotted: no point recorded it.",
    "efficiency": "Efficiency is not plotted: every configuration ran at a single node count.",
}


def _plot_notes(figures: list[RenderedFigure], points: pd.DataFrame) -> list[str]:
    """Say why an expected plot is absent instead of leaving a silent gap (with the records' reason)."""
    names = {figure.name for figure in figures}
    if "throughput" not in names:
        return [_PLOT_NOTES["throughput"]]
    notes = [note for name, note in _PLOT_NOTES.items() if name not in names]
    reasons = sorted(set(points["mfu_note"].dropna()))
    if "mfu" not in names and reasons:
        notes.append("Recorded reason: " + "; ".join(reasons[:3]))
    return notes
