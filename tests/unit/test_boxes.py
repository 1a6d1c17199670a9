"""reports/boxes.py: box plots drawn as a few lines give the PNG bytes of matplotlib's
`Axes.boxplot` (many boxes, one, two, boxes of one value, fliers, labels), with its limits and
ticks, in 8 lines for 40 boxes instead of 280; rcParams asking for another kind of box plot get
matplotlib's own."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from reports.boxes import box_plot
from reports.report.html import render_figure


def _figure(draw, data, labels):
    fig = Figure(figsize=(5, 0.3 * len(data) + 1))
    ax = fig.add_axes((0.3, 0.1, 0.65, 0.8))
    draw(ax, data, labels)
    ax.invert_yaxis()
    ax.grid(True, axis="x", alpha=0.3)
    return fig, ax


def _matplotlibs(ax, data, labels):
    ax.boxplot(data, orientation="horizontal", tick_labels=labels, showfliers=True, flierprops={"markersize": 3})


def _lines(ax, data, labels):
    box_plot(ax, data, labels, flier_size=3)


def _boxes(count: int, seed: int = 0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    data = [list(rng.normal(1.0 + i / 10, 0.05, size=30)) for i in range(count)]
    for values in data[::3]:
        values += [3.0, -1.0]  # fliers either side
    return data


@pytest.mark.parametrize(
    "data",
    [
        _boxes(40),
        _boxes(1),
        _boxes(2, seed=1),
        [[2.0] * 10, [1.0, 1.0, 1.0], [1.5]],  # boxes of one value: whiskers and caps meet
        [[1.0, 2.0], [0.5, 0.7, 30.0, 0.6, 0.55]],
    ],
    ids=["40 boxes", "one box", "two boxes", "one value", "few values"],
)
def test_the_same_bytes_as_matplotlibs_boxplot(data):
    labels = [f"configuration {i} · {i + 1} nodes" for i in range(len(data))]
    ours, our_ax = _figure(_lines, data, labels)
    theirs, their_ax = _figure(_matplotlibs, data, labels)
    assert render_figure("boxes", "", ours).png == render_figure("boxes", "", theirs).png
    assert our_ax.get_ylim() == their_ax.get_ylim() and our_ax.get_xlim() == their_ax.get_xlim()
    assert [t.get_text() for t in our_ax.get_yticklabels()] == labels


def test_forty_boxes_are_eight_lines():
    _, ours = _figure(_lines, _boxes(40), [str(i) for i in range(40)])
    _, theirs = _figure(_matplotlibs, _boxes(40), [str(i) for i in range(40)])
    # boxes (2 lines: 21 and 19), low and high whiskers, low and high caps, fliers, medians (1 line each)
    assert (len(ours.lines), len(theirs.lines)) == (8, 280)
    assert max(len(line.get_xdata()) for line in ours.lines) < 128  # below matplotlib's path simplification


@pytest.mark.parametrize(
    ("rc", "lines"),
    [
        ({"boxplot.notch": True, "boxplot.showmeans": True}, 5 * 8),  # a line per part and box, the means among them
        ({"boxplot.flierprops.linestyle": "-"}, 5 * 7),  # a line through each box's fliers, not all boxes'
        ({"path.sketch": (1, 100, 2)}, 5 * 7),
    ],
    ids=["notches and means", "a line through the fliers", "sketched"],
)
def test_another_kind_of_box_plot_is_matplotlibs(rc, lines):
    data, labels = _boxes(5), list("abcde")
    with matplotlib.rc_context(rc):
        ours, our_ax = _figure(_lines, data, labels)
        theirs, _ = _figure(_matplotlibs, data, labels)
        np.random.seed(0)  # a sketch's jitter: the same draws for both
        ours_png = render_figure("boxes", "", ours).png
        np.random.seed(0)
        assert ours_png == render_figure("boxes", "", theirs).png
    assert len(our_ax.lines) == lines
