"""Render the self-contained report.html with Jinja2 (autoescaping on for every value).

Figures arrive as PNG bytes and are embedded as base64 data URIs: the page loads nothing
from the network (its Content-Security-Policy forbids it) and survives being copied alone.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

if TYPE_CHECKING:  # drawn elsewhere: importing this module loads no matplotlib
    from matplotlib.figure import Figure

TEMPLATES = Path(__file__).resolve().parent / "templates"
# 100 dpi keeps a two-panel figure near 1,100 px wide: sharp on screen, small enough to embed.
DPI = 100
# zlib level 3 instead of Pillow's default 6: the same pixels, ~2 % more bytes, ~40 % less encoding
# time (a 10,000-point report's six figures: ~0.5 CPU-seconds less).
PNG_OPTIONS = {"compress_level": 3}


@dataclass(frozen=True)
class RenderedFigure:
    """One plot as it appears on the page and on disk."""

    name: str
    caption: str
    png: bytes
    width: int
    height: int

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def render_figure(name: str, caption: str, fig: Figure) -> RenderedFigure:
    """PNG-encode a Figure; the pixel size goes into the img tag so the layout does not jump."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, pil_kwargs=PNG_OPTIONS)
    width, height = (int(round(v)) for v in fig.canvas.get_width_height())
    return RenderedFigure(name, caption, buffer.getvalue(), width, height)


def render_html(context: dict[str, Any], template: str = "report.html.j2") -> str:
    """A page from bench/present/report/templates/ (the report; `history.html.j2` for `fsdp-bench history`);
    a missing context key is an error, not blank."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined, keep_trailing_newline=True
    )
    return env.get_template(template).render(**context)
