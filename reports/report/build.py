"""build_report: records in, OUT/report.html + OUT/*.png + OUT/summary.md + OUT/results.csv out.

The one entry point the `report` and `sweep` commands call. Pure pipeline: records ->
frame -> cells -> scaling series -> figures and tables -> files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench.analysis.gc_pause import gc_paused
from bench.analysis.pool import worker_pool
from bench.analysis.records import RecordProblem
from bench.analysis.report.digest import RecordsDigest, digest
from bench.analysis.report.export import write_csv
from bench.analysis.report.views import analyse_columns
from bench.schema.files import write_bytes_atomic, write_text_atomic, writing
from bench.schema.preflight import PreflightResult
from bench.schema.record import RunResult
from reports.report import tables
from reports.report import telemetry as telemetry_view
from reports.report.autotune import autotune_section
from reports.report.breakdown import breakdown_table
from reports.report.checkpoint import checkpoint_table
from reports.report.cluster_health import cluster_health
from reports.report.environment import environment_lines
from reports.report.flag_rules import flag_rules
from reports.report.html import (
    REPORT_PAGE,
    RenderedFigure,
    load_template,
    render_figure,
    render_html,
    rows_written,
)
from reports.report.render import FIGURE_MODULES, Figures, pays
from reports.report.reproduce import default_commands
from reports.report.summary_md import render_summary


def build_report(
    records: Iterable[RunResult] | RecordsDigest,
    out_dir: Path | str = "report",
    *,
    title: str | None = None,
    reproduce: Sequence[str] | None = None,
    problems: Sequence[tuple[str, str]] = (),
    point_dirs: Mapping[tuple[str, str], Path] | None = None,
    preflights: Sequence[PreflightResult] = (),
    pool: Executor | None = None,
) -> Path:
    """Write the report of `records` (or of their digest: bench/analysis/report/digest.py) into
    `out_dir`; returns the path of report.html.

    `reproduce`: the exact commands that produced the results (the sweep passes its own
    command line); one `fsdp-bench run` per configuration follows them. `problems`: (file,
    reason) pairs of records that could not be read, listed on the page. `point_dirs`: each
    record's folder by (sweep, point id), where the telemetry timelines are read from.
    `preflights`: the results' preflight records, drawn in the cluster health section.
    `pool`: the worker processes that draw the figures of a big report (reports/report/render.py
    `pays`; bench/analysis/pool.py: the `report` command's, which read its records); None: a pool of
    the report's own for such a report. A smaller report's figures are drawn here.
    """
    with gc_paused():
        found = records if isinstance(records, RecordsDigest) else digest(list(records))
        parts = (found, Path(out_dir), title, reproduce, problems, point_dirs, preflights)
        if not pays(len(found)):
            return _build(*parts, Figures())
        if pool is not None:
            return _build(*parts, Figures(pool))
        with worker_pool(FIGURE_MODULES) as own:
            return _build(*parts, Figures(own))


def _build(
    found: RecordsDigest,
    out: Path,
    title: str | None,
    reproduce: Sequence[str] | None,
    problems: Sequence[tuple[str, str]],
    point_dirs: Mapping[tuple[str, str], Path] | None,
    preflights: Sequence[PreflightResult],
    figures: Figures,
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    # With a pool, the figures of the records' frame are drawn while the rest is aggregated, and those
    # of the scaling frame while each point gets its series.
    analysis = analyse_columns(found.columns, figures.records_frame, figures.scaling_frame)
    figures.points_frame(analysis.points, analysis.scaling)
    return _write(out, analysis, found, title, reproduce, problems, point_dirs, preflights, figures)


def _write(out, analysis, found, title, reproduce, problems, point_dirs, preflights, figures: Figures) -> Path:
    """Everything but the main figures first (a pool's workers draw them meanwhile), then the page.

    `found`: the records' digest. Every section reads the analysis's frames; the two that read records
    (cluster health, autotune) read `found.notable`, the only records a digest keeps whole: a new
    section that reads records must read these and add what it needs to digest.is_notable."""
    points = analysis.points
    title = title or _default_title(points)
    timelines = _timelines(points, point_dirs)
    health = cluster_health(preflights, found.notable)
    environment = environment_lines(points)
    headline, scaling = tables.headline_table(analysis.scaling), tables.scaling_table(analysis.scaling)
    failed = tables.failed_table(points)
    contention = tables.contention_table(points)
    commands = [*(reproduce or []), "# each configuration alone:", *default_commands(points)]
    flagged = tables.flagged_table(points)
    split = breakdown_table(points)
    summary = render_summary(
        title,
        environment,
        headline,
        scaling,
        failed,
        flagged,
        telemetry_view.telemetry_table(points, only_flagged=True),
        contention,
        split,
    )
    write_text_atomic(out / "summary.md", summary)
    context = {
        "title": title,
        "environment": environment,
        "headline": headline,
        "scaling": scaling,
        "contention": contention,
        "rules": flag_rules(preflights),
        "telemetry": telemetry_view.telemetry_table(points),
        "telemetry_figures": timelines,
        "telemetry_notes": _telemetry_notes(points, timelines, point_dirs),
        "results": tables.results_table(points),
        "checkpoints": checkpoint_table(points),
        "breakdown": split,
        "failed": failed,
        "problems": tables.problems_table(list(problems)),
        "reproduce": commands,
        "has_prediction": tables.has_prediction(points),
        "autotune": autotune_section(analysis.cells, found.notable),
        "health": health,
    }
    write_csv(points, out / "results.csv")
    context = rows_written(context)  # the tables' rows written while the workers still draw,
    load_template(REPORT_PAGE)  # and the page compiled: after the last figure, the page is only put together
    drawn = figures.collect()
    for figure in [*drawn, *timelines, *health.figures]:
        write_bytes_atomic(out / f"{figure.name}.png", figure.png)
    context |= {
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "figures": drawn,
        "plot_notes": _plot_notes(drawn, points),
    }
    write_text_atomic(out / "report.html", render_html(context))
    return out / "report.html"


def _default_title(points: pd.DataFrame) -> str:
    sweeps = sorted(points["sweep"].dropna().unique())
    name = ", ".join(sweeps[:3]) + (f" and {len(sweeps) - 3} more" if len(sweeps) > 3 else "")
    return f"fsdp-bench report: {name or 'no records'}"


def _timelines(points: pd.DataFrame, point_dirs: Mapping[tuple[str, str], Path] | None) -> list[RenderedFigure]:
    """The telemetry timelines (one figure of small multiples), when some point's series is at hand."""
    fig = telemetry_view.timeline_figure(points, telemetry_view.load_timelines(points, point_dirs))
    if fig is None:
        return []
    caption = "Telemetry over the timed steps: one row per point (flagged first), a line per rank or host"
    return [render_figure("telemetry", caption, fig)]


def _telemetry_notes(
    points: pd.DataFrame, timelines: list[RenderedFigure], point_dirs: Mapping[tuple[str, str], Path] | None
) -> list[str]:
    """Why a part of the telemetry section is empty."""
    with_telemetry = int(telemetry_view.has_telemetry(points).sum())
    if not with_telemetry:
        return ["No point carries telemetry (telemetry.enabled=false, or records from before it existed)."]
    notes = []
    if not timelines:
        notes.append(
            "No timelines: they are drawn from the series next to each result.json (report a results folder, "
            "not a store)."
            if not point_dirs
            else "No timelines: no point's series file was found beside its record."
        )
    elif with_telemetry > telemetry_view.MAX_TIMELINES:
        notes.append(f"Timelines of {telemetry_view.MAX_TIMELINES} of {with_telemetry} points (flagged points first).")
    if reasons := telemetry_view.energy_notes(points):
        notes.append("Energy per token not measured: " + "; ".join(reasons))
    return notes


_PLOT_NOTES = {
    "throughput": "No point finished ok, so there is nothing to plot.",
    "mfu": "MFU is not plotted: no point has one (MFU is null for devices without a published peak, e.g. CPUs).",
    "memory": "Peak memory is not plotted: no point recorded it.",
    "efficiency": "Efficiency is not plotted: every configuration ran at a single node count.",
    "energy": "Energy per token is not plotted: no point measured it (telemetry needs NVML's GPU energy counter, "
    "or readable RAPL on CPU hosts; the telemetry section says why).",
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


def write_report(
    records: Sequence[RunResult] | RecordsDigest,
    out: Path,
    *,
    title: str | None = None,
    reproduce: Sequence[str] = (),
    problems: Sequence[RecordProblem] = (),
    point_dirs: dict[tuple[str, str], Path] | None = None,
    preflights: Sequence[PreflightResult] = (),
    pool: Executor | None = None,
) -> Path:
    """build_report of these records, a full disk naming the report's folder (`report` and `sweep` call this).

    `reproduce`: the exact command lines that made these results (the sweep passes its own);
    the page adds one `fsdp-bench run` per configuration after them. `point_dirs`: each record's
    folder by (sweep, point id), for the telemetry timelines (bench.schema.protocol.point_dir for a sweep).
    `pool`: the workers that draw a big report's figures (build_report).
    """
    with writing(out):  # a full disk names the report's folder (bench/run/ownership/storage.py)
        return build_report(
            records,
            out,
            title=title,
            reproduce=reproduce,
            problems=[(str(p.path), p.reason) for p in problems],
            point_dirs=point_dirs,
            preflights=preflights,
            pool=pool,
        )
