"""The figures' one style: palette, markers, line styles, panel geometry and axes, for the report,
the history page and every other figure (reports).

Okabe-Ito colours with a distinct marker per series, so lines stay apart in greyscale and for
colour-blind readers; node axes log2; plain numbers on value axes; legends outside the axes so
they never cover data; fixed geometry in inches (no layout engine: it re-measures every text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # no display: figures render on headless CI runners and cluster login nodes

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import AutoLocator, FixedLocator, FuncFormatter, Locator, LogLocator, NullLocator  # noqa: E402

if TYPE_CHECKING:  # an annotation only: the history page's figures are drawn without pandas
    import pandas as pd

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision
# deficiencies. Yellow goes last: it is the hardest to see on white.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# Eight series per panel: one per palette colour; beyond that lines become unreadable.
MAX_SERIES = len(PALETTE)
IDEAL_STYLE = {"linestyle": "--", "linewidth": 1.0, "alpha": 0.7}
# Panel geometry (inches): axes, then margins for tick labels and title, and the legend column.
PANEL_WIDTH_IN, PANEL_HEIGHT_IN = 5.2, 2.7
LEFT_IN, LEGEND_IN, TOP_IN, BOTTOM_IN = 0.95, 3.75, 0.4, 0.6


# Legend labels longer than this are cut (with an ellipsis) so they fit the legend column.
MAX_LABEL_CHARS = 56


def shorten(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def legend_outside(ax, ideal_labels: list[str]) -> None:
    """The series legend to the right of the axes, plus one grey dashed entry per ideal line kind."""
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="grey", **IDEAL_STYLE) for _ in ideal_labels]
    ax.legend(
        handles,
        labels + ideal_labels,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0,
        fontsize="small",
        frameon=False,
    )


# Plain numbers with thousands separators ("4,000"), not "4 x 10^3".
_THOUSANDS = FuncFormatter(lambda value, _: f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}")


# A log value axis only pays off when the values span more than this factor; below it the
# 1-2-5 ticks of a log axis would leave the axis nearly unlabelled.
LOG_MIN_SPAN = 8.0


def value_axis(ax, log_y: bool) -> None:
    """Log10 y axis with 1-2-5 ticks when the data span a wide range, else linear; plain numbers."""
    low, high = ax.dataLim.y0, ax.dataLim.y1
    if log_y and low > 0 and high / low > LOG_MIN_SPAN:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(InView(LogLocator(base=10, subs=(1.0, 2.0, 5.0))))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylabel(ax.get_ylabel().removesuffix(")") + ", log scale)")
    else:
        ax.yaxis.set_major_locator(InView(AutoLocator()))
    ax.yaxis.set_major_formatter(_THOUSANDS)


class InView(Locator):
    """`inner`'s ticks without those beyond the axis' view, which matplotlib builds (five artists and a
    label each) and then leaves undrawn: a log axis' locator returns a decade more on each side, half
    the ticks of a throughput panel. The same pixels; for formatters that read each value alone (the
    others choose a format from every tick's value, the undrawn ones too)."""

    # Kept: ticks this close beyond the view (a fraction of its span); matplotlib decides on those.
    MARGIN = 1e-6

    def __init__(self, inner: Locator) -> None:
        self.inner = inner

    def set_axis(self, axis) -> None:
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def __call__(self):
        low, high = sorted(self.axis.get_view_interval())
        margin = (high - low) * self.MARGIN
        ticks = np.asarray(self.inner())
        return ticks[(ticks >= low - margin) & (ticks <= high + margin)]

    def tick_values(self, vmin, vmax):
        return self.inner.tick_values(vmin, vmax)

    def view_limits(self, vmin, vmax):
        return self.inner.view_limits(vmin, vmax)

    def nonsingular(self, vmin, vmax):  # autoscaling asks the locator (a log one keeps limits above 0)
        return self.inner.nonsingular(vmin, vmax)


def log2_nodes(ax, nodes: pd.Series) -> None:
    """A log2 node axis labelled with the node counts that occur (1, 2, 4, ...)."""
    ticks = sorted({int(n) for n in nodes})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlim(ticks[0] / 1.4, ticks[-1] * 1.4)  # 1.4: half a log2 step of margin on each side
    ax.set_xlabel("nodes (log2 scale)")


def single_axes(width: float, height: float, left: float, right: float, bottom: float, top: float = 0.45):
    """A Figure with one Axes of the given size and margins, all in inches (no layout engine)."""
    total_w, total_h = left + width + right, bottom + height + top
    fig = Figure(figsize=(total_w, total_h))
    return fig, fig.add_axes((left / total_w, bottom / total_h, width / total_w, height / total_h))
