"""bench/present/legend_packing.py: legends packed once per draw draw the same pixels (the report's
figures among them), pack each box once per legend draw, pack again after a change, leave packers
outside legends to matplotlib, and leave an unknown matplotlib alone."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from matplotlib.offsetbox import AnchoredOffsetbox, HPacker, TextArea, VPacker
from report_figures import assert_the_same_bytes_once_installed
from text_figure import text_figure

from bench.present import legend_packing
from bench.present.report.html import render_figure


@pytest.fixture
def restored(monkeypatch):
    """matplotlib's own legends, put back after the test whatever it installs."""
    monkeypatch.setattr(Legend, "draw", legend_packing.matplotlibs_draw)
    for packer, packing in legend_packing.matplotlibs_packing.items():
        monkeypatch.setattr(packer, "_get_bbox_and_child_offsets", packing)
    return monkeypatch


def _counted(restored) -> list[str]:
    """The packings matplotlib computes, by packer kind, from now on (under the memo where installed)."""
    packed = []
    for packer, matplotlibs in legend_packing.matplotlibs_packing.items():

        def counted(self, renderer, _matplotlibs=matplotlibs):
            packed.append(type(self).__name__)
            return _matplotlibs(self, renderer)

        if packer._get_bbox_and_child_offsets is matplotlibs:  # not installed: matplotlib's own, counted
            restored.setattr(packer, "_get_bbox_and_child_offsets", counted)
        restored.setitem(legend_packing.matplotlibs_packing, packer, counted)
    return packed


def test_legends_packed_once_draw_the_same_pixels(restored):
    def png() -> bytes:
        fig, ax = text_figure()
        ax.legend(ncols=2, title="series", loc="lower right")  # columns and a title: deeper packing
        return render_figure("legend", "", fig).png

    assert_the_same_bytes_once_installed(legend_packing.install, png)
    assert Legend.draw is legend_packing.packed_draw


def test_each_box_is_packed_once_per_legend_draw(restored):
    fig, ax = text_figure()
    legend = ax.get_legend()
    renderer = FigureCanvasAgg(fig).get_renderer()
    packed = _counted(restored)
    legend.draw(renderer)
    matplotlibs = len(packed)
    packed.clear()
    legend_packing.install()
    legend.draw(renderer)
    boxes = len(packed)
    assert 0 < boxes < matplotlibs / 2
    legend.draw(renderer)  # a new draw packs again: a change between draws is followed
    assert len(packed) == 2 * boxes


def test_a_changed_legend_is_packed_again(restored):
    fig, ax = text_figure()
    legend_packing.install()
    renderer = FigureCanvasAgg(fig).get_renderer()
    legend = ax.get_legend()
    legend.draw(renderer)
    narrow = legend.get_window_extent(renderer).width
    legend.get_texts()[0].set_text("a much longer label than any of the others")
    legend.draw(renderer)
    assert legend.get_window_extent(renderer).width > narrow


def test_packers_outside_a_legend_are_packed_by_matplotlib(restored):
    fig, ax = text_figure()
    box = VPacker(children=[HPacker(children=[TextArea("a"), TextArea("b")]), TextArea("c")])
    ax.add_artist(AnchoredOffsetbox(loc="center", child=box))
    renderer = FigureCanvasAgg(fig).get_renderer()
    legend_packing.install()
    packed = _counted(restored)
    box.get_bbox(renderer)
    box.get_bbox(renderer)
    assert packed == ["VPacker", "HPacker", "VPacker", "HPacker"]


def test_an_unknown_matplotlib_is_left_alone(restored):
    restored.setattr(matplotlib, "__version__", "3.11.0")
    assert not legend_packing.install()
    assert Legend.draw is legend_packing.matplotlibs_draw
