"""A small figure with every kind of text the report's figures draw, for the tests of the figure
workers' text memos (bench/present/text_layout.py, bench/present/text_glyphs.py): legend labels,
math-text tick labels of a log axis, rotated and right-aligned tick labels, a two-line title, a
rotated centred text."""

from __future__ import annotations

import numpy as np

from bench.present.style import single_axes


def text_figure():
    """(Figure, Axes) of the sample."""
    fig, ax = single_axes(4, 2, left=0.8, right=2.5, bottom=0.7)
    for index, label in enumerate(["llama2-7b · full_shard · bf16", "llama2-13b · no_shard · fp32"]):
        ax.plot(np.arange(1, 6), np.arange(1, 6) ** (index + 2), marker="os"[index], label=label)
    ax.set_yscale("log")  # math text tick labels: 10^0, 10^1, ...
    ax.set_xticks([1, 2, 3, 4, 5], ["one", "two", "three", "four", "five"], rotation=15, ha="right", fontsize=8)
    ax.set_title("Throughput\nsecond line", y=1.0, loc="left")
    ax.text(3, 10, "centred", ha="center", va="center", rotation=30)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    return fig, ax
