"""Text layouts computed once per text and renderer: the figures a process draws lay out each text once.

matplotlib lays a text out (`Text._get_layout`: its lines' metrics, rotation and alignment, as a box
relative to the text's position) every time it asks where the text is: for a tick label's extent, a
legend's packing, an axis label's place, and again to draw it, in numpy on arrays of four points.
The report's six figures of 10,000 records asked about 2,300 times, most of them for a text laid out
before with the same font and alignment; memoized per renderer, as matplotlib already memoizes the
metrics beneath (`_get_text_metrics_with_cache`), the six figures took 1,560 ms of CPU against
1,816 ms at 41f7418 (medians of five runs each, benchmarks/bench_figures.py, whose runs overlap: a
gain of the order of a tenth; docs/reports.md, Performance), and the PNGs are the same bytes
(`tests/unit/test_text_layout.py`).

The layout depends on the text, its font, line spacing, rotation, alignments, math parsing and the
figure's dpi, all in the key; wrapped and TeX texts are laid out as matplotlib does. `install()`
replaces `matplotlib.text.Text._get_layout` in matplotlib 3.10 (bench/present/matplotlib_patches.py),
whose layout this module was written against, and leaves any other version as it is.
"""

from __future__ import annotations

import weakref

from matplotlib.text import Text

from bench.present.matplotlib_patches import replace

# Layouts kept per renderer at most (a figure's texts are a few hundred).
MAX_LAYOUTS = 4096

# matplotlib's own layout, which the memo calls on a miss.
matplotlibs_layout = Text._get_layout
# Each renderer's layouts, forgotten with the renderer (as matplotlib's metrics cache is).
_layouts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def install() -> bool:
    """Memoize text layouts in this process from now on; False where matplotlib is not the version
    known here (nothing is changed then). Installing twice is installing once."""
    return replace([(Text, "_get_layout", memoized_layout)])


def memoized_layout(self: Text, renderer):
    """Text._get_layout's (bbox, lines, descent), computed once per text state and renderer. Callers
    read the result and never change it (they translate a copy of the box)."""
    if self._wrap or self.get_usetex():
        return matplotlibs_layout(self, renderer)
    key = (
        self.get_figure(root=True).dpi, self._text, hash(self._fontproperties), self._linespacing,
        self.get_rotation(), self._get_multialignment(), self._horizontalalignment, self._verticalalignment,
        self.get_rotation_mode(), self._parse_math,
    )  # fmt: skip
    layouts = _layouts.get(renderer)
    if layouts is None or len(layouts) >= MAX_LAYOUTS:
        layouts = _layouts[renderer] = {}
    layout = layouts.get(key)
    if layout is None:
        layout = layouts[key] = matplotlibs_layout(self, renderer)
    return layout
