"""bench/present/text_glyphs.py: texts rasterized and measured once draw the same pixels (the report's
figures among them), rasterize each text once per font, size and dpi, follow a change of font, size,
dpi or antialiasing, pass math text to matplotlib, and leave an unknown matplotlib alone."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from report_figures import report_pngs
from text_figure import text_figure

from bench.present import text_glyphs
from bench.present.style import single_axes


@pytest.fixture
def restored(monkeypatch):
    """matplotlib's own drawing and measuring, and no text kept, after the test whatever it installs."""
    monkeypatch.setattr(RendererAgg, "draw_text", text_glyphs.matplotlibs_draw_text)
    monkeypatch.setattr(RendererAgg, "get_text_width_height_descent", text_glyphs.matplotlibs_text_metrics)
    text_glyphs.forget()
    yield monkeypatch
    text_glyphs.forget()


def _png(dpi_scale: float = 1.0) -> bytes:
    fig, ax = text_figure()
    ax.text(2, 5, "two", fontsize=8, antialiased=False)  # a tick label's text and size, aliased
    fig.set_dpi(100 * dpi_scale)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return bytes(np.asarray(canvas.buffer_rgba()))


def test_texts_kept_draw_the_same_pixels(restored):
    with matplotlib.rc_context({"text.hinting": "none"}):  # other hinting flags: other glyphs
        unhinted = _png()
    matplotlibs = [_png(), _png(1.5)]
    assert unhinted != matplotlibs[0]
    assert text_glyphs.install() and RendererAgg.draw_text is text_glyphs.memoized_draw_text
    assert text_glyphs.install()  # twice is once
    assert [_png(), _png(1.5)] == matplotlibs  # another dpi: other bitmaps
    assert [_png(), _png(1.5)] == matplotlibs  # and again, every text from what is kept
    with matplotlib.rc_context({"text.hinting": "none"}):  # the texts kept with other hinting are not used
        assert _png() == unhinted


def test_the_report_figures_are_the_same_bytes(restored):
    matplotlibs = report_pngs()
    assert sum(png is not None for png in matplotlibs.values()) >= 4
    text_glyphs.install()
    assert report_pngs() == matplotlibs  # the texts made
    assert report_pngs() == matplotlibs  # the texts kept


def test_each_text_is_rasterized_and_measured_once_per_font_size_and_dpi(restored):
    prepared = []
    matplotlibs_prepare = RendererAgg._prepare_font

    def counted(renderer, prop):
        prepared.append(prop.get_size_in_points())
        return matplotlibs_prepare(renderer, prop)

    restored.setattr(RendererAgg, "_prepare_font", counted)
    text_glyphs.install()
    _png()
    first = len(prepared)
    _png()
    assert first > 0 and len(prepared) == first  # the second figure's texts were all kept
    _png(1.5)
    assert first < len(prepared) <= 2 * first  # another dpi: the texts made again, once each


def test_math_text_is_drawn_by_matplotlib(restored):
    drawn, matplotlibs = [], text_glyphs.matplotlibs_draw_text

    def math(renderer, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        drawn.append((s, ismath))
        return matplotlibs(renderer, gc, x, y, s, prop, angle, ismath, mtext)

    fig, ax = single_axes(2, 1, left=0.5, right=0.2, bottom=0.3)
    ax.text(0.5, 0.5, r"$\alpha^2$")
    text_glyphs.install()
    restored.setattr(text_glyphs, "matplotlibs_draw_text", math)
    FigureCanvasAgg(fig).draw()
    assert (r"$\alpha^2$", True) in drawn


def test_an_unknown_matplotlib_is_left_alone(restored):
    restored.setattr(matplotlib, "__version__", "3.11.0")
    assert not text_glyphs.install()
    assert RendererAgg.draw_text is text_glyphs.matplotlibs_draw_text
