"""One plot per series: the metric run by run, the change points marked and annotated.

Each run is a dot (x: its position in time order); the median of each segment between change
points is a horizontal line; a change point is a vertical line at its first run, vermillion for a
regression and blue for an improvement (the report's Okabe-Ito colours), annotated with the change,
its interval and what changed in the environment there. Numerics failures are black crosses.
Returns matplotlib Figures (Agg backend, reports.report.plots' palette); reports/report/html.py encodes them.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bench.analysis.history.analyse import SeriesResult
from bench.schema.metrics import get
from reports.style import PALETTE

REGRESSION_COLOUR, IMPROVEMENT_COLOUR, RUN_COLOUR = PALETTE[1], PALETTE[0], "#555555"
WIDTH_IN, HEIGHT_IN = 11.0, 3.4
# Environment items per annotation, and characters per item: the rest is in the table below the plots.
ANNOTATION_ITEMS, ANNOTATION_CHARS = 3, 42


def series_figure(result: SeriesResult) -> Figure:
    """The series' runs, segment medians, change points and numerics failures."""
    series = result.series
    metric = get(series.metric)  # the catalogue says how the axis is labelled and scaled
    scale = metric.display.scale
    x = np.arange(1, len(series.runs) + 1)
    y = np.asarray(series.values, dtype=float) * scale
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN))
    ax = fig.add_axes((0.07, 0.17, 0.9, 0.68))
    ax.plot(x, y, linestyle="none", marker="o", markersize=3.5, color=RUN_COLOUR, gid="runs", label="run")
    bounds = [0, *(c.index for c in result.changes), len(series.runs)]
    for start, stop in zip(bounds, bounds[1:]):
        level = float(np.median(y[start:stop]))
        ax.plot([start + 0.6, stop + 0.4], [level, level], color=PALETTE[2], linewidth=2, gid=f"segment:{start}")
    top = float(np.nanmax(y)) if len(y) else 1.0
    for change in result.changes:
        colour = REGRESSION_COLOUR if change.regression else IMPROVEMENT_COLOUR
        position = change.index + 0.5  # between the last run before and the first run after
        ax.axvline(position, color=colour, linestyle="--", linewidth=1.5, gid=f"change:{change.index}")
        # In the headroom above the runs (x in data, y in axes coordinates), on a white ground; to the
        # left of a change point in the last third, so the text stays inside the figure.
        left = change.index > len(series.runs) * 2 / 3
        ax.annotate(
            _annotation(change), (position, 0.98), xycoords=ax.get_xaxis_transform(), xytext=(-4 if left else 4, 0),
            textcoords="offset points", fontsize=7, color=colour, va="top", ha="right" if left else "left",
            gid=f"note:{change.index}",
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1},
        )  # fmt: skip
    for issue in result.numerics:
        ax.plot(issue.index + 1, y[issue.index], marker="x", markersize=9, color="black", gid=f"numerics:{issue.index}")
    ax.set_xlim(0.3, len(series.runs) + 0.7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top * 1.45 if top > 0 else 1.0)
    ax.set_xlabel("run, in the order they ran (first run after a change point: right of its dashed line)")
    ax.set_ylabel(metric.axis_label)
    ax.set_title(series.label, fontsize=9, loc="left", y=1.0)
    ax.grid(True, alpha=0.3)
    return fig


def _annotation(change) -> str:
    head = f"run {change.index + 1}: {change.change * 100:+.1f}% [{(change.ci_low - 1) * 100:+.1f}, "
    head += f"{(change.ci_high - 1) * 100:+.1f}]"
    items = [
        item if len(item) <= ANNOTATION_CHARS else item[: ANNOTATION_CHARS - 1] + "…" for item in change.environment
    ]
    if len(items) > ANNOTATION_ITEMS:
        items = items[:ANNOTATION_ITEMS] + [f"+{len(change.environment) - ANNOTATION_ITEMS} more"]
    return "\n".join([head, *(items or ["no environment change recorded"])])
