"""A figure's pixels as PNG bytes (`encode_png`): the encoder of every figure fsdp-bench draws.

Pillow, which matplotlib's savefig uses, filters each row adaptively (it tries PNG's five filters
and keeps the one whose bytes sum least) before zlib compresses them. On a figure (white space,
thin lines, text) that choice costs most of the encoding and compresses no better than no filter at
all: the six figures of a 10,000-point report, rows left unfiltered and compressed at zlib level 3,
took 107 ms in all against Pillow's 236 ms at the same level, in 1.50 MB against its 1.58 MB
(benchmarks/bench_png.py at 30c256d; docs/reports.md, Performance). The pixels are the same: a PNG decoder gives
back exactly the array encoded (tests/unit/test_png.py).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# zlib's level: the one the report used with Pillow before (set then for its speed over Pillow's default 6).
LEVEL = 3
# IHDR's colour types (PNG spec 11.2.2) by channel count: truecolour, truecolour with alpha.
_COLOUR_TYPES = {3: 2, 4: 6}
# PNG row filter type 0: the row's bytes as they are.
_NO_FILTER = 0
_METRES_PER_INCH = 0.0254
# An RGBA pixel as its RGB bytes and its alpha byte, and an RGB pixel as one 3-byte item.
_RGBA = np.dtype([("rgb", "V3"), ("alpha", "u1")])
_RGB = np.dtype("V3")


def encode_png(rgba: np.ndarray, dpi: float, text: dict[str, str] | None = None) -> bytes:
    """An (height, width, 4) uint8 RGBA array as PNG: RGB where every pixel is opaque (the figures'
    white background: a quarter fewer bytes to compress), else RGBA; `dpi` in its pHYs chunk, as
    savefig writes it, and `text` as tEXt chunks (Latin-1 keywords and values, as PNG requires)."""
    height, width, _ = rgba.shape
    channels = 3 if bool((rgba[..., 3] == 255).all()) else 4
    rows = np.empty((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 0] = _NO_FILTER
    if channels == 4:
        rows[:, 1:] = rgba.reshape(height, width * 4)
    else:  # each pixel's first three bytes as one item: a third of the time numpy takes byte by byte
        rows[:, 1:].view(_RGB)[...] = np.ascontiguousarray(rgba).view(_RGBA).reshape(height, width)["rgb"]
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPES[channels], 0, 0, 0)
    per_metre = int(dpi / _METRES_PER_INCH + 0.5)
    chunks = [(b"IHDR", header), (b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1))]
    chunks += [
        (b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1")) for key, value in (text or {}).items()
    ]
    chunks += [(b"IDAT", zlib.compress(rows, LEVEL)), (b"IEND", b"")]
    return SIGNATURE + b"".join(_chunk(kind, data) for kind, data in chunks)


def _chunk(kind: bytes, data: bytes) -> bytes:
    """Length, type, data and the CRC of type and data (PNG spec 5.3)."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
