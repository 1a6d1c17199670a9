"""An axis' ticks after its first copied from the first, not built: the same ticks, the same pixels.

matplotlib makes an axis' ticks as it needs them (`Axis.get_major_ticks`): each new one is built from
the axis' tick settings (a `Tick` builds three lines and two texts, each from keyword arguments and
rcParams, a marker and transforms each) and is then given the first tick's properties
(`Axis._copy_tick_props`). The report's figures have 52 axes and build about 400 ticks, 300 of them
after their axis' first. Here such a tick is a copy of the first (its five artists copied, each with
its own callbacks, sticky edges and path cache, so nothing is shared that a tick changes in place),
then given the first tick's properties and its own position as matplotlib gives them: what matplotlib
built, in a fraction of the time (tests/unit/test_tick_copies.py draws the report's figures both ways
and compares the PNG bytes).

Only plain x and y ticks are copied (a polar axis' ticks carry transforms of their own that they move
in place), and only where the first tick's labels have no box patch. `install()` replaces
`Axis.get_major_ticks` and `Axis.get_minor_ticks` in matplotlib 3.10 (bench/present/matplotlib_patches.py),
whose artists this module was written against, and leaves any other version as it is. Installed by the report's figure workers
(bench/present/report/render.py).
"""

from __future__ import annotations

from matplotlib import cbook
from matplotlib.artist import Artist, _XYPair
from matplotlib.axis import Axis, Tick, XTick, YTick
from matplotlib.lines import Line2D
from matplotlib.text import Text

from bench.present.matplotlib_patches import replace

# matplotlib's own, which install() replaces.
matplotlibs_major_ticks = Axis.get_major_ticks
matplotlibs_minor_ticks = Axis.get_minor_ticks
# The tick classes whose state is the five artists and values (nothing a tick moves in place).
_COPIED = (XTick, YTick)
_PARTS = ("tick1line", "tick2line", "gridline", "label1", "label2")


def install() -> bool:
    """Copy new ticks from their axis' first in this process from now on; False where matplotlib is not
    the version known here (nothing is changed then). Installing twice is installing once."""
    return replace([(Axis, "get_major_ticks", major_ticks), (Axis, "get_minor_ticks", minor_ticks)])


def major_ticks(self: Axis, numticks: int | None = None) -> list[Tick]:
    """Axis.get_major_ticks, its new ticks copied from the first."""
    if numticks is None:
        numticks = len(self.get_majorticklocs())
    _grow(self, self.majorTicks, numticks, major=True)
    return self.majorTicks[:numticks]


def minor_ticks(self: Axis, numticks: int | None = None) -> list[Tick]:
    """Axis.get_minor_ticks, its new ticks copied from the first."""
    if numticks is None:
        numticks = len(self.get_minorticklocs())
    _grow(self, self.minorTicks, numticks, major=False)
    return self.minorTicks[:numticks]


def _grow(axis: Axis, ticks: list[Tick], count: int, major: bool) -> None:
    """Add ticks up to `count`, as matplotlib does (its lazy list always holds a first one)."""
    first = ticks[0]
    copyable = type(first) in _COPIED and first.label1._bbox_patch is None and first.label2._bbox_patch is None
    while len(ticks) < count:
        tick = copied_tick(first) if copyable else axis._get_tick(major=major)
        ticks.append(tick)
        axis._copy_tick_props(first, tick)


def copied_tick(tick: Tick) -> Tick:
    """A new tick of the same axis with `tick`'s state, its artists copies of `tick`'s."""
    copy = _copied(tick)
    for part in _PARTS:
        setattr(copy, part, _copied(getattr(tick, part)))
    return copy


def _copied(artist: Artist) -> Artist:
    """`artist`'s attributes in a new object of its class, less what each artist must own: its callbacks
    and sticky edges; a line's path is made again from its data (as its data changes), a text has no
    renderer yet (as a new one)."""
    copy = object.__new__(type(artist))
    copy.__dict__.update(artist.__dict__)
    copy._callbacks = cbook.CallbackRegistry(signals=["pchanged"])
    copy._sticky_edges = _XYPair([], [])
    if isinstance(artist, Line2D):
        copy._transformed_path = None
        copy._invalidx = copy._invalidy = True
    elif isinstance(artist, Text):
        copy._renderer = None
    return copy
