"""Texts rasterized and measured once per font, size and dpi in a process: the figures a worker draws
lay out each tick label, legend entry and title's glyphs once, not once per panel and figure.

matplotlib's Agg renderer draws a text by laying its glyphs out (`FT2Font.set_text`), rasterizing
them into the font's bitmap and blitting that bitmap (`RendererAgg.draw_text`), and measures a text
the same way (`get_text_width_height_descent`), every time, for every renderer: a new figure is a new
renderer. The report's line figures repeat their texts panel after panel and figure after figure (the
node counts, the legends' series labels, the axis labels and titles): of the six figures' 1,500 or so
layouts, most were of a text already laid out with the same font. The bitmap depends on the text, the
font (its files, hinting and kerning factors: the font object itself, which matplotlib caches by
them), its size, the dpi, the hinting flags and the antialiasing, all in the key; it is kept as a copy
of the font's bitmap with its descent and offset, and blitted as matplotlib blits it, so the PNGs are
the same bytes (`tests/unit/test_text_glyphs.py`). Math text and TeX are drawn as matplotlib draws
them.

`install()` replaces `RendererAgg.draw_text` and `RendererAgg.get_text_width_height_descent` in
matplotlib 3.10 (bench/present/matplotlib_patches.py), whose drawing
this module was written against, and leaves any other version as it is. Installed by the report's figure workers
(bench/present/report/render.py), beside bench/present/fonts.py and bench/present/text_layout.py.
"""

from __future__ import annotations

from math import cos, radians, sin

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font

from bench.present.matplotlib_patches import replace

# Texts kept at most (each a bitmap of a few kB; the report's figures have a few hundred distinct ones).
MAX_TEXTS = 4096

# matplotlib's own drawing and measuring, which the memos call where they do not apply.
matplotlibs_draw_text = RendererAgg.draw_text
matplotlibs_text_metrics = RendererAgg.get_text_width_height_descent
# key -> (bitmap, descent, x offset, y offset), in pixels; key -> (width, height, descent).
_bitmaps: dict[tuple, tuple[np.ndarray, float, float, float]] = {}
_metrics: dict[tuple, tuple[float, float, float]] = {}


def install() -> bool:
    """Rasterize and measure each text once in this process from now on; False where matplotlib is not
    the version known here (nothing is changed then). Installing twice is installing once."""
    return replace(
        [(RendererAgg, "draw_text", memoized_draw_text),
         (RendererAgg, "get_text_width_height_descent", memoized_text_metrics)]
    )  # fmt: skip


def forget() -> None:
    """Drop every text kept (a benchmark's round starts as a fresh worker does)."""
    _bitmaps.clear()
    _metrics.clear()


def _key(renderer: RendererAgg, text: str, prop) -> tuple:
    """What a text's glyphs depend on: the text, the font object (its files, hinting and kerning
    factors), the size, the dpi and the hinting flags (renderer._prepare_font's and set_text's inputs)."""
    font = get_font(fontManager._find_fonts_by_props(prop))
    return (text, font, prop.get_size_in_points(), renderer.dpi, get_hinting_flag())


def memoized_draw_text(self: RendererAgg, gc, x, y, s, prop, angle, ismath=False, mtext=None):
    """RendererAgg.draw_text, the text's bitmap made once per key and antialiasing."""
    if ismath:
        return matplotlibs_draw_text(self, gc, x, y, s, prop, angle, ismath, mtext)
    antialiased = gc.get_antialiased()
    key = (*_key(self, s, prop), antialiased)
    glyphs = _bitmaps.get(key)
    if glyphs is None:
        font = self._prepare_font(prop)
        font.set_text(s, 0, flags=key[-2])
        font.draw_glyphs_to_bitmap(antialiased=antialiased)
        x_offset, y_offset = font.get_bitmap_offset()
        glyphs = (np.array(font.get_image(), dtype=np.uint8), font.get_descent() / 64.0, x_offset / 64.0,
                  y_offset / 64.0)  # fmt: skip
        _remember(_bitmaps, key, glyphs)
    bitmap, descent, x_offset, y_offset = glyphs
    # As matplotlib places the bitmap: the descent turned with the text, rounded to whole pixels.
    x = round(x + x_offset + descent * sin(radians(angle)))
    y = round(y + y_offset + descent * cos(radians(angle)))
    self._renderer.draw_text_image(bitmap, x, y + 1, angle, gc)


def memoized_text_metrics(self: RendererAgg, s, prop, ismath):
    """RendererAgg.get_text_width_height_descent, measured once per key (math, TeX and any other value
    of `ismath` as matplotlib measures or refuses them)."""
    if ismath is not False:
        return matplotlibs_text_metrics(self, s, prop, ismath)
    key = _key(self, s, prop)
    metrics = _metrics.get(key)
    if metrics is None:
        metrics = matplotlibs_text_metrics(self, s, prop, ismath)
        _remember(_metrics, key, metrics)
    return metrics


def _remember(memo: dict, key: tuple, value) -> None:
    if len(memo) >= MAX_TEXTS:
        memo.clear()
    memo[key] = value
