"""bench/present/fonts.py: fonts opened from memory draw the same pixels, with no read of the font file
per glyph; a matplotlib whose font cache is not the one known is left alone."""

from __future__ import annotations

import os

import numpy as np
from matplotlib import font_manager

from bench.present import fonts
from bench.present.report.html import render_figure
from bench.present.style import single_axes


def _png() -> bytes:
    fig, ax = single_axes(4, 2, left=0.8, right=0.2, bottom=0.5)
    ax.plot(np.arange(5), np.arange(5) ** 2, label="llama2-7b · full_shard · bf16 · batch 8/dev (weak)")
    ax.set_title("Throughput, tokens/s: 0123456789 äöü …")
    ax.legend(loc="upper left", fontsize="small")
    return render_figure("fonts", "", fig).png


def test_fonts_in_memory_draw_the_same_pixels(monkeypatch):
    matplotlibs = font_manager._get_font
    monkeypatch.setattr(font_manager, "_get_font", matplotlibs)  # restored after the test
    path = font_manager.findfont("DejaVu Sans")
    assert os.path.isfile(font_manager.get_font(path).fname)  # matplotlib's font reads its file
    from_files = _png()
    assert fonts.install()
    installed = font_manager._get_font
    assert installed is not matplotlibs
    assert fonts.install() and font_manager._get_font is installed  # twice is once
    assert _png() == from_files
    font = font_manager.get_font(path)
    assert not os.path.isfile(str(font.fname))  # opened from memory: no file behind it
    assert font is font_manager.get_font(path)  # cached like matplotlib's


def test_an_unknown_font_cache_is_left_alone(monkeypatch):
    def other(paths, hinting_factor):  # a matplotlib whose cache takes other arguments
        raise AssertionError("not called")

    monkeypatch.setattr(font_manager, "_get_font", other)
    assert fonts.install() is False
    assert font_manager._get_font is other
