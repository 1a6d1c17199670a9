"""An axis' new ticks copied from a pattern, not built: the same ticks, the same pixels.

matplotlib makes an axis' ticks as it needs them (`Axis.get_major_ticks`): each new one is built from
the axis' tick settings (a `Tick` builds three lines and two texts, each from keyword arguments and
rcParams, a marker and transforms each) and is then given the first tick's properties
(`Axis._copy_tick_props`). The report's figures have 52 axes and build about 400 ticks, 300 of them
after their axis' first. Here, whenever matplotlib builds a tick (`Axis._get_tick`: an axis' first, or
a tick of settings changed since), a copy of it is kept as the axis' pattern, untouched by whatever is
done to the tick itself later; a new tick of the same settings is a copy of the pattern (its five
artists copied, each with its own callbacks, sticky edges and path cache, so nothing is shared that a
tick changes in place), then given the first tick's properties and its own position as matplotlib
gives them: what matplotlib builds, in a fraction of the time (tests/unit/test_tick_copies.py draws
the report's figures both ways and compares the PNG bytes, and changes a first tick before more are
made).

Only plain x and y ticks are copied (a polar axis' ticks carry transforms of their own that they move
in place), and only where the pattern's labels have no box patch. A pattern is made under the
rcParams in force when matplotlib built it: ticks added later under other rcParams (an `rc_context`
between one draw and the next) are copies of it, where matplotlib would read the new ones.
`install()` replaces `Axis._get_tick`, `Axis.get_major_ticks` and `Axis.get_minor_ticks` in
matplotlib 3.10 (bench/present/matplotlib_patches.py), whose artists this module was written against,
and leaves any other version as it is. Installed by the report's figure workers
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
matplotlibs_get_tick = Axis._get_tick
matplotlibs_major_ticks = Axis.get_major_ticks
matplotlibs_minor_ticks = Axis.get_minor_ticks
# The tick classes whose state is the five artists and values (nothing a tick moves in place).
_COPIED = (XTick, YTick)
_PARTS = ("tick1line", "tick2line", "gridline", "label1", "label2")
# The attribute an axis keeps its patterns in: {major: (the settings it was built from, a copy of the
# tick built)}. On the axis, not in a table of this module's: a pattern refers to its axes, which
# would keep a table's axis alive.
_PATTERNS = "_fsdp_bench_tick_patterns"


def install() -> bool:
    """Copy new ticks from their axis' pattern in this process from now on; False where matplotlib is
    not the version known here (nothing is changed then). Installing twice is installing once."""
    return replace(
        [(Axis, "_get_tick", built_tick), (Axis, "get_major_ticks", major_ticks),
         (Axis, "get_minor_ticks", minor_ticks)]
    )  # fmt: skip


def built_tick(self: Axis, major: bool) -> Tick:
    """Axis._get_tick, a copy of the tick kept as the axis' pattern for ticks of the same settings."""
    tick = matplotlibs_get_tick(self, major)
    if type(tick) in _COPIED and tick.label1._bbox_patch is None and tick.label2._bbox_patch is None:
        patterns = self.__dict__.setdefault(_PATTERNS, {})
        patterns[major] = (dict(_settings(self, major)), copied_tick(tick))
    return tick


def major_ticks(self: Axis, numticks: int | None = None) -> list[Tick]:
    """Axis.get_major_ticks, its new ticks copied from the axis' pattern."""
    if numticks is None:
        numticks = len(self.get_majorticklocs())
    _grow(self, self.majorTicks, numticks, major=True)
    return self.majorTicks[:numticks]


def minor_ticks(self: Axis, numticks: int | None = None) -> list[Tick]:
    """Axis.get_minor_ticks, its new ticks copied from the axis' pattern."""
    if numticks is None:
        numticks = len(self.get_minorticklocs())
    _grow(self, self.minorTicks, numticks, major=False)
    return self.minorTicks[:numticks]


def _grow(axis: Axis, ticks: list[Tick], count: int, major: bool) -> None:
    """Add ticks up to `count`, as matplotlib does (its lazy list always holds a first one)."""
    first = ticks[0]
    while len(ticks) < count:
        pattern = _pattern(axis, major)
        tick = copied_tick(pattern) if pattern is not None else axis._get_tick(major=major)
        ticks.append(tick)
        axis._copy_tick_props(first, tick)


def _pattern(axis: Axis, major: bool) -> Tick | None:
    """The axis' pattern for a new tick, None where matplotlib must build it: none kept (another kind
    of tick, an axis class with its own `_get_tick`), or its settings changed since."""
    settings, pattern = axis.__dict__.get(_PATTERNS, {}).get(major, (None, None))
    try:
        same = pattern is not None and bool(settings == _settings(axis, major))
    except (TypeError, ValueError):  # a setting that does not compare (an array): built again
        same = False
    return pattern if same else None


def _settings(axis: Axis, major: bool) -> dict:
    """What matplotlib builds the axis' next tick from, besides rcParams."""
    return axis._major_tick_kw if major else axis._minor_tick_kw


def copied_tick(tick: Tick) -> Tick:
    """A new tick of the same axis with `tick`'s state, its artists copies of `tick`'s (a pattern kept is
    never handed out itself: the ticks drawn are copies)."""
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
