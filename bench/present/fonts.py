"""Fonts opened from memory: every figure this process draws reads its font files once, not glyph by glyph.

matplotlib's FreeType wrapper opens a font through a Python file object, and FreeType reads each glyph
it loads through it: a seek and a read on the font file, two system calls, for every glyph of every
text drawn. The report's six figures of 10,000 records made about 150,000 of each in a worker. A font
opened from its bytes in memory (an io.BytesIO, which FT2Font takes as it takes a file) is read with
the same calls but no system call: about 0.2 s less CPU for those figures, the same glyphs and the
same pixels (`tests/unit/test_fonts.py` compares the PNGs).

matplotlib forgets its fonts in a forked child (their file's position is shared with the parent); a
font in memory shares nothing, so the fonts a worker loaded before it forked its siblings
(bench/present/report/render.py) stay theirs.

`install()` replaces `matplotlib.font_manager._get_font`, the cache every text's font comes from, where
its signature is the one this module was written against (matplotlib 3.10, pinned below 3.11 in
pyproject.toml); otherwise it leaves matplotlib as it is.
"""

from __future__ import annotations

import functools
import inspect
import io

from matplotlib import font_manager, ft2font

# The parameters of font_manager._get_font this replacement takes (matplotlib 3.10).
_SIGNATURE = ["font_filepaths", "hinting_factor", "_kerning_factor", "thread_id"]


def install() -> bool:
    """Open this process's fonts from memory from now on; False where matplotlib's cache is not the
    one known here (nothing is changed then). Installing twice is installing once."""
    current = font_manager._get_font
    if current is _get_font:
        return True
    if list(inspect.signature(current).parameters) != _SIGNATURE:
        return False
    font_manager._get_font = _get_font
    return True


@functools.lru_cache(64)
def _get_font(font_filepaths, hinting_factor, *, _kerning_factor, thread_id):
    """font_manager._get_font's font (the first path, the others as its fallbacks), opened from memory."""
    first, *rest = font_filepaths
    fallbacks = [ft2font.FT2Font(_in_memory(path), hinting_factor, _kerning_factor=_kerning_factor) for path in rest]
    return ft2font.FT2Font(_in_memory(first), hinting_factor, _fallback_list=fallbacks, _kerning_factor=_kerning_factor)


@functools.lru_cache(16)
def _font_bytes(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _in_memory(path) -> io.BytesIO:
    """A file object of the font's bytes: each font object reads at its own position."""
    return io.BytesIO(_font_bytes(str(path)))
