"""Marker styles built once per marker and fill style, and copied without a deep copy: the same
markers, the same pixels.

Every matplotlib line carries a `MarkerStyle`, tick marks and lines without markers too: a line
builds one when it is made (its marker function run: paths and transforms made), and again, as a deep
copy of another line's, each time it takes that line's properties (`Line2D.update_from`: every new
tick, every legend handle). The report's figures build about 4,000. Nothing changes a built style's
paths or transforms in place (matplotlib replaces a line's marker to change it, and hands a style's
transform out frozen) but `rotated()` and `scaled()`, which change their new style's own transform,
so here a style of a named marker (`"o"`, `"_"`, a tick direction, `""`...) is a copy of the
attributes of the one built first for that marker and fill style, and a style made from another
style without a transform of its own a copy of its attributes: the same style, in a fraction of the
time
(tests/unit/test_marker_styles.py draws the report's figures both ways and compares the PNG bytes).

Styles with their own transform, cap or join style, paths, vertices and math-text markers are built by
matplotlib. `install()` replaces `MarkerStyle.__init__` in matplotlib 3.10 (bench/present/matplotlib_patches.py),
whose markers this module was written against, and leaves any other version as it is. Installed by the report's figure workers
(bench/present/report/render.py).
"""

from __future__ import annotations

from matplotlib import cbook
from matplotlib.markers import MarkerStyle

from bench.present.matplotlib_patches import replace

# matplotlib's own, which install() replaces.
matplotlibs_init = MarkerStyle.__init__
matplotlibs_fill_check = MarkerStyle._set_fillstyle
# (marker's type, marker, fill style) -> the style matplotlib built for them.
_built: dict[tuple, MarkerStyle] = {}


def install() -> bool:
    """Build each named marker style once in this process from now on; False where matplotlib is not the
    version known here (nothing is changed then). Installing twice is installing once."""
    return replace([(MarkerStyle, "__init__", copied_init)])


def forget() -> None:
    """Drop the styles built (the next of each marker is built again)."""
    _built.clear()


def copied_init(self: MarkerStyle, marker, fillstyle=None, transform=None, capstyle=None, joinstyle=None) -> None:
    """MarkerStyle.__init__, a named marker's style copied from the one built first, another style
    without a transform of its own copied without a deep copy (matplotlib copies it deeply; nothing in
    such a style is changed in place)."""
    if transform is None and capstyle is None and joinstyle is None:
        # A style with a transform of its own is deep-copied: rotated() and scaled() change the copy's
        # transform in place.
        if isinstance(marker, MarkerStyle) and marker._user_transform is None:
            matplotlibs_fill_check(self, fillstyle)  # as matplotlib checks it (then ignores it)
            self.__dict__.update(marker.__dict__)
            return
        if _named(marker):
            matplotlibs_fill_check(self, fillstyle)
            key = (type(marker), marker, self._fillstyle)
            built = _built.get(key)
            if built is None:
                built = MarkerStyle.__new__(MarkerStyle)
                matplotlibs_init(built, marker, self._fillstyle)
                _built[key] = built  # kept once built: a marker matplotlib refuses is not kept
            self.__dict__.update(built.__dict__)
            return
    matplotlibs_init(self, marker, fillstyle, transform, capstyle, joinstyle)


def _named(marker) -> bool:
    """A marker of MarkerStyle.markers by its name or number (not math text, which matplotlib tries
    first; 1 and "1" are different markers, hence the type in the key)."""
    return (
        isinstance(marker, int | str)
        and not isinstance(marker, bool)
        and not (isinstance(marker, str) and cbook.is_math_text(marker))
        and marker in MarkerStyle.markers
    )
