"""bench/present/marker_styles.py: marker styles built once draw the same pixels (the report's figures
among them), are built once per marker and fill style, follow a change of fill style, leave styles of
paths, vertices, math text and transforms to matplotlib, and leave an unknown matplotlib alone."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.markers import MarkerStyle
from matplotlib.transforms import Affine2D
from report_figures import assert_the_same_bytes_once_installed
from text_figure import text_figure

from bench.present import marker_styles
from bench.present.report.html import render_figure


@pytest.fixture
def restored(monkeypatch):
    """matplotlib's own marker styles, put back after the test whatever it installs."""
    monkeypatch.setattr(MarkerStyle, "__init__", marker_styles.matplotlibs_init)
    marker_styles.forget()
    yield monkeypatch
    marker_styles.forget()


def _png() -> bytes:
    fig, ax = text_figure()  # round and square markers, their legend handles, tick marks
    ax.plot([1, 3], [2, 40], marker="^", fillstyle="left", markersize=12)
    ax.plot([2, 4], [3, 30], marker="$x$", linestyle="none")  # math text: matplotlib's
    return render_figure("markers", "", fig).png


def test_styles_built_once_draw_the_same_pixels(restored):
    assert_the_same_bytes_once_installed(marker_styles.install, _png)
    assert MarkerStyle.__init__ is marker_styles.copied_init


def test_a_named_style_is_built_once_per_fill_style(restored):
    built, matplotlibs = [], marker_styles.matplotlibs_init

    def counted(self, marker, fillstyle=None, *args):
        built.append((marker, fillstyle))
        matplotlibs(self, marker, fillstyle, *args)

    restored.setattr(marker_styles, "matplotlibs_init", counted)
    marker_styles.install()
    circles = [MarkerStyle("o") for _ in range(3)]
    assert built == [("o", "full")] and len({id(style) for style in circles}) == 3
    left = MarkerStyle("o", "left")
    assert built[-1] == ("o", "left") and left.get_fillstyle() == "left" and circles[0].get_fillstyle() == "full"
    assert MarkerStyle(1).get_marker() == 1 and MarkerStyle("1").get_marker() == "1"  # two markers, not one
    copy = MarkerStyle(left)
    assert copy is not left and copy.get_fillstyle() == "left" and copy.get_path() is left.get_path()
    assert len(built) == 4


def test_other_styles_are_built_by_matplotlib(restored):
    marker_styles.install()
    turned = MarkerStyle("s", transform=Affine2D().rotate_deg(45))
    assert np.allclose(
        turned.get_transform().get_matrix(), MarkerStyle("s").get_transform().rotate_deg(45).get_matrix()
    )
    assert MarkerStyle(np.array([[0, 0], [1, 0], [0, 1]])).get_path().vertices.shape[0] >= 3
    for _ in range(2):  # refused each time, as matplotlib refuses it
        with pytest.raises(ValueError, match="fillstyle"):
            MarkerStyle("o", "sideways")


def test_a_turned_or_scaled_copy_leaves_its_source_alone(restored):
    marker_styles.install()
    turned = MarkerStyle("o").rotated(deg=30)
    turned.rotated(deg=60)
    assert np.allclose(turned.get_user_transform().get_matrix(), Affine2D().rotate_deg(30).get_matrix())
    scaled = MarkerStyle("o", transform=Affine2D())
    scaled.scaled(2)
    assert np.allclose(scaled.get_user_transform().get_matrix(), Affine2D().get_matrix())


def test_an_unknown_matplotlib_is_left_alone(restored):
    restored.setattr(matplotlib, "__version__", "3.11.0")
    assert not marker_styles.install()
    assert MarkerStyle.__init__ is marker_styles.matplotlibs_init
