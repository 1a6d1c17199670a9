"""bench/present/text_layout.py: memoized text layouts draw the same pixels, lay each text out once per
renderer, follow a change of font, and leave an unknown matplotlib alone."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text
from text_figure import text_figure

from bench.present import text_layout
from bench.present.report.html import render_figure
from bench.present.style import single_axes


@pytest.fixture
def restored(monkeypatch):
    """matplotlib's own layout, put back after the test whatever it installs."""
    monkeypatch.setattr(Text, "_get_layout", text_layout.matplotlibs_layout)
    return monkeypatch


def _png() -> bytes:
    fig, _ = text_figure()
    return render_figure("layout", "", fig).png


def test_memoized_layouts_draw_the_same_pixels(restored):
    matplotlibs = _png()
    assert text_layout.install() and Text._get_layout is text_layout.memoized_layout
    assert text_layout.install()  # twice is once
    assert _png() == matplotlibs
    assert _png() == matplotlibs  # and again, from the renderer's layouts


def test_each_text_is_laid_out_once_per_renderer(restored):
    laid_out, matplotlibs = [], text_layout.matplotlibs_layout

    def counted(self, renderer):
        laid_out.append(self.get_text())
        return matplotlibs(self, renderer)

    restored.setattr(text_layout, "matplotlibs_layout", counted)
    asked = []

    def asking(self, renderer):
        asked.append(self.get_text())
        return text_layout.memoized_layout(self, renderer)

    restored.setattr(Text, "_get_layout", asking)
    _png()
    assert len(asked) > len(laid_out) > 0
    assert laid_out.count("llama2-7b · full_shard · bf16") == 1  # a legend text: asked for its extent, then drawn


def test_a_changed_font_is_laid_out_again(restored):
    fig, ax = single_axes(2, 1, left=0.5, right=0.2, bottom=0.3)
    text = ax.text(0.5, 0.5, "tokens/s")
    renderer = FigureCanvasAgg(fig).get_renderer()
    small = text.get_window_extent(renderer)
    text_layout.install()
    assert text.get_window_extent(renderer).bounds == small.bounds
    text.set_fontsize(30)
    restored.setattr(Text, "_get_layout", text_layout.matplotlibs_layout)
    large = text.get_window_extent(renderer)
    text_layout.install()
    assert text.get_window_extent(renderer).bounds == large.bounds and large.width > small.width


def test_an_unknown_matplotlib_is_left_alone(restored):
    restored.setattr(matplotlib, "__version__", "3.11.0")
    assert not text_layout.install()
    assert Text._get_layout is text_layout.matplotlibs_layout
