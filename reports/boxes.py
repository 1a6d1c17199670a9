"""Horizontal box plots drawn as a few line artists (`box_plot`): `Axes.boxplot`'s statistics, geometry,
styles, ticks and limits, with each part of every box (the boxes, the low whiskers, ... the medians, the
fliers) in one line instead of one line per box and part.

`Axes.boxplot` makes every part of every box by its own `Axes.plot` call: the report's step-time
figure, 40 boxes, had 280 of them, which took 43 % of drawing the figure. One line per part draws the
same pixels: the parts of one line never overlap one another (one per box, boxes a position apart and
each part of a box in its own line: the two whiskers and the two caps apart), so each pixel blends
the same strokes as before, each part in the colour and order of its kind (the medians over the rest:
their z-order is higher, as in `Axes.bxp`). A line is kept below 128 vertices, from where matplotlib
simplifies a path when it draws it (`Path.should_simplify`). Where the rcParams ask for a box plot of
another kind (notches, patches, means, no caps or boxes, a line through the fliers, sketched paths)
`Axes.boxplot` draws it.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
from matplotlib import cbook
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator

# The box plot these lines draw: matplotlib's defaults of its kind (anything else: Axes.boxplot draws).
_DRAWN = {"boxplot.notch": False, "boxplot.patchartist": False, "boxplot.showmeans": False,
          "boxplot.showcaps": True, "boxplot.showbox": True, "boxplot.vertical": True}  # fmt: skip
# matplotlib simplifies a path of this many vertices or more when drawing it (Path.should_simplify).
_SIMPLIFIED_FROM = 128


def box_plot(ax: Axes, data: Sequence[Sequence[float]], labels: Sequence[str], flier_size: float) -> None:
    """`ax.boxplot(data, orientation="horizontal", tick_labels=labels, showfliers=True,
    flierprops={"markersize": flier_size})`, drawn as one line per part of the boxes."""
    flierprops = {"markersize": flier_size}
    if not _drawn_here() or not len(data):
        ax.boxplot(data, orientation="horizontal", tick_labels=labels, showfliers=True, flierprops=flierprops)
        return
    stats = cbook.boxplot_stats(
        data, whis=mpl.rcParams["boxplot.whiskers"], bootstrap=mpl.rcParams["boxplot.bootstrap"], labels=labels
    )
    positions = np.arange(1, len(stats) + 1)
    # Axes.bxp's widths and cap widths, its coordinates computed as it computes them (the same floats).
    width = np.clip(0.15 * np.ptp(positions), 0.15, 0.5)
    cap = 0.5 * width
    q1, q3, med, low, high = (
        np.array([s[key] for s in stats], dtype=float) for key in ("q1", "q3", "med", "whislo", "whishi")
    )
    box_low, box_high = positions - width * 0.5, positions + width * 0.5
    cap_low, cap_high = positions - cap * 0.5, positions + cap * 0.5
    at = positions.astype(float)
    parts = [  # (kind, each box's x values, its y values), in Axes.bxp's order of kinds
        ("box", (q1, q1, q3, q3, q1), (box_low, box_high, box_high, box_low, box_low)),
        ("whisker", (q1, low), (at, at)),
        ("whisker", (q3, high), (at, at)),
        ("cap", (low, low), (cap_low, cap_high)),
        ("cap", (high, high), (cap_low, cap_high)),
    ]
    for kind, xs, ys in parts:
        for x, y in _chunks(np.column_stack(xs), np.column_stack(ys)):
            ax.plot(x, y, **_style(kind))
    fliers = [np.asarray(s["fliers"], dtype=float) for s in stats]
    flier_x = np.concatenate(fliers)
    flier_y = np.concatenate([np.full(len(f), p, dtype=np.float64) for f, p in zip(fliers, positions, strict=True)])
    ax.plot(flier_x, flier_y, **{**_style("flier", marker=True), **cbook.normalize_kwargs(flierprops, Line2D)})
    # Axes.bxp clamps the medians to the box's edges (butt caps), where a style does not say otherwise.
    median_style = {**_style("median", zdelta=0.1), "solid_capstyle": "butt", "dash_capstyle": "butt"}
    medians = [
        ax.plot(x, y, **median_style)[0]
        for x, y in _chunks(np.column_stack((med, med)), np.column_stack((box_low, box_high)))
    ]
    # Axes.bxp's management of the position axis: its data interval, the medians' sticky edges, the ticks.
    interval = ax.dataLim.intervaly
    interval[:] = (min(interval[0], positions.min() - 0.5), max(interval[1], positions.max() + 0.5))
    medians[0].sticky_edges.y.extend(edge for p in positions for edge in (p - 0.5, p + 0.5))
    ax.yaxis.set_major_locator(FixedLocator(positions))
    ax.yaxis.set_major_formatter(FixedFormatter([s.get("label", p) for s, p in zip(stats, positions, strict=True)]))
    ax._request_autoscale_view()


def _drawn_here() -> bool:
    """Whether the rcParams ask for the box plot these lines draw: matplotlib's defaults of its kind,
    fliers without a line between them (one line per box joins a box's own), no sketched paths."""
    return (
        all(mpl.rcParams[key] == value for key, value in _DRAWN.items())
        and mpl.rcParams["boxplot.flierprops.linestyle"] in _NO_LINE
        and mpl.rcParams["path.sketch"] is None
    )


# A line style that draws no line.
_NO_LINE = ("none", "None", "", " ")


def _style(kind: str, zdelta: float = 0.0, marker: bool = False) -> dict:
    """Axes.bxp's properties of a part (its merge_kw_rc): the rcParams' boxplot.<kind>props, its z-order."""
    style = {key.split(".")[-1]: value for key, value in mpl.rcParams.items() if key.startswith(f"boxplot.{kind}props")}
    style["zorder"] = Line2D.zorder + zdelta
    if not marker:
        style["marker"] = ""
    style["label"] = "_nolegend_"
    return style


def _chunks(xs: np.ndarray, ys: np.ndarray):
    """(x, y) of lines that draw these pieces (a row of vertices each), NaN between pieces, each line
    below _SIMPLIFIED_FROM vertices."""
    per_piece = xs.shape[1] + 1
    pieces = max(1, _SIMPLIFIED_FROM // per_piece)
    for start in range(0, len(xs), pieces):
        x, y = xs[start : start + pieces], ys[start : start + pieces]
        gap = np.full((len(x), 1), np.nan)
        yield np.hstack((x, gap)).ravel()[:-1], np.hstack((y, gap)).ravel()[:-1]
