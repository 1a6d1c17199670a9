"""bench/present/png.py: the figures' PNGs decode to exactly the pixels encoded, with savefig's dpi and
Software text; RGB where every pixel is opaque, RGBA where one is not."""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from bench.present.png import SIGNATURE, encode_png
from bench.present.report.html import DPI, render_figure
from bench.present.style import single_axes


def _decoded(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png))
    image.load()  # checks every chunk's CRC and the compressed stream's end
    return image


def _figure():
    fig, ax = single_axes(4, 2, left=0.8, right=0.2, bottom=0.5)
    ax.plot(np.arange(5), np.arange(5) ** 2, marker="o", label="llama2-7b · full_shard")
    ax.set_title("Throughput, tokens/s")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def test_a_figure_decodes_to_the_pixels_savefig_draws():
    figure = render_figure("throughput", "", _figure())
    saved = io.BytesIO()
    _figure().savefig(saved, format="png", dpi=DPI)
    expected = np.asarray(_decoded(saved.getvalue()).convert("RGB"))
    image = _decoded(figure.png)
    assert image.mode == "RGB"  # every pixel opaque: no alpha channel
    assert (figure.width, figure.height) == image.size == (expected.shape[1], expected.shape[0])
    assert np.array_equal(np.asarray(image), expected)
    assert image.info["Software"].startswith("Matplotlib version")
    assert image.info["dpi"] == pytest.approx((DPI, DPI), abs=1e-3)  # pHYs: 3,937 pixels per metre


def test_translucent_pixels_keep_their_alpha():
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)
    rgba[0, 0, 3] = 128
    image = _decoded(encode_png(rgba, 72.0, {"Title": "äöü"}))
    assert image.mode == "RGBA"
    assert np.array_equal(np.asarray(image), rgba)
    assert image.info["Title"] == "äöü"


def test_an_opaque_array_is_written_as_rgb_rows_left_unfiltered():
    rgba = np.full((3, 2, 4), 255, dtype=np.uint8)
    rgba[1, 1, :3] = (10, 20, 30)
    png = encode_png(rgba, 100.0)
    assert png.startswith(SIGNATURE)
    assert np.array_equal(np.asarray(_decoded(png)), rgba[..., :3])
    start = png.index(b"IDAT") + 4
    length = int.from_bytes(png[start - 8 : start - 4], "big")
    rows = zlib.decompress(png[start : start + length])
    assert rows == b"".join(b"\0" + bytes(row) for row in rgba[..., :3].reshape(3, 6))  # filter byte 0: none
