"""bench/present/tick_copies.py: ticks copied from their axis' pattern draw the same pixels (the report's
figures among them), are built only where the axis' settings changed, own what a tick changes in place,
leave changes to a first tick out as matplotlib does, leave other tick kinds to matplotlib, and leave an
unknown matplotlib alone."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.axis import Axis, XTick, YTick
from matplotlib.figure import Figure
from report_figures import assert_the_same_bytes_once_installed
from text_figure import text_figure

from bench.present import tick_copies
from bench.present.report.html import render_figure


@pytest.fixture
def restored(monkeypatch):
    """matplotlib's own ticks, put back after the test whatever it installs."""
    monkeypatch.setattr(Axis, "_get_tick", tick_copies.matplotlibs_get_tick)
    monkeypatch.setattr(Axis, "get_major_ticks", tick_copies.matplotlibs_major_ticks)
    monkeypatch.setattr(Axis, "get_minor_ticks", tick_copies.matplotlibs_minor_ticks)
    return monkeypatch


def test_copied_ticks_draw_the_same_pixels(restored):
    def png() -> bytes:
        fig, ax = text_figure()  # log y axis with minor ticks, rotated x labels of their own size
        ax.grid(True, which="both", alpha=0.3)
        return render_figure("ticks", "", fig).png

    assert_the_same_bytes_once_installed(tick_copies.install, png)
    assert Axis.get_major_ticks is tick_copies.major_ticks


def test_new_ticks_of_unchanged_settings_are_not_built(restored):
    built = []
    for kind in (XTick, YTick):
        matplotlibs = kind.__init__

        def counted(self, *args, _matplotlibs=matplotlibs, **kwargs):
            built.append(type(self).__name__)
            _matplotlibs(self, *args, **kwargs)

        restored.setattr(kind, "__init__", counted)
    tick_copies.install()
    ax = Figure().add_axes((0.1, 0.1, 0.8, 0.8))
    ax.xaxis.reset_ticks()  # a fresh first tick of each kind, as a new scale gives
    before = len(built)
    ticks = ax.xaxis.get_major_ticks(6)
    assert len(built) == before and len(ticks) == 6 and len({id(tick) for tick in ticks}) == 6
    assert [tick.get_loc() for tick in ticks[1:]] == [ticks[0].get_loc()] * 5  # placed at draw, as matplotlib's


def test_a_copy_owns_what_a_tick_changes_in_place(restored):
    tick_copies.install()
    ax = Figure().add_axes((0.1, 0.1, 0.8, 0.8))
    first, copy = ax.yaxis.get_major_ticks(2)
    for part in ("tick1line", "tick2line", "gridline", "label1", "label2"):
        mine, its = getattr(copy, part), getattr(first, part)
        assert mine is not its and mine._callbacks is not its._callbacks, part
        assert mine.sticky_edges.x is not its.sticky_edges.x, part
    copy.label1.set_fontsize(20)  # its own font properties (matplotlib copies them in _copy_tick_props)
    assert first.label1.get_fontsize() != 20
    copy.update_position(3.0)
    assert list(copy.gridline.get_ydata()) == [3.0] and list(first.gridline.get_ydata()) != [3.0]
    assert copy.stale_callback is first.stale_callback is not None  # a change still marks the axes stale


def test_polar_ticks_are_built_by_matplotlib(restored):
    tick_copies.install()
    ax = Figure().add_subplot(projection="polar")
    ticks = ax.xaxis.get_major_ticks(3)
    assert type(ticks[0]) not in (XTick, YTick)
    assert len({id(tick._text1_translate) for tick in ticks}) == 3  # each its own transform


def test_an_unknown_matplotlib_is_left_alone(restored):
    restored.setattr(matplotlib, "__version__", "3.11.0")
    assert not tick_copies.install()
    assert Axis.get_major_ticks is tick_copies.matplotlibs_major_ticks


def _more_ticks_png() -> bytes:
    """A figure whose first ticks are changed (beyond what matplotlib copies to new ticks, and through
    the axis' settings) before more ticks are made."""
    fig = Figure(figsize=(4, 3))
    ax = fig.add_axes((0.15, 0.2, 0.8, 0.7))
    ax.plot([0, 1], [0, 1])
    for label in ax.get_xticklabels():  # not passed on to new ticks by matplotlib
        label.set(rotation=45, ha="right", rotation_mode="anchor", zorder=0.5)
    ax.set_xticks([i / 20 for i in range(21)])  # new ticks
    ax.tick_params(axis="y", labelsize=6, length=8)  # new settings, then new ticks
    ax.set_yticks([i / 10 for i in range(11)])
    return render_figure("more ticks", "", fig).png


def test_new_ticks_after_a_changed_first_are_matplotlibs(restored):
    matplotlibs = _more_ticks_png()
    tick_copies.install()
    assert _more_ticks_png() == matplotlibs
