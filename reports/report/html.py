"""Render the self-contained report.html with Jinja2 (autoescaping on for every value).

Figures arrive as PNG bytes and are embedded as base64 data URIs: the page loads nothing
from the network (its Content-Security-Policy forbids it) and survives being copied alone.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template
from markupsafe import Markup, escape

if TYPE_CHECKING:  # drawn elsewhere: importing this module loads no matplotlib
    from matplotlib.figure import Figure

TEMPLATES = Path(__file__).resolve().parent / "templates"
# The report's page (the history page has its own template).
REPORT_PAGE = "report.html.j2"
# 100 dpi keeps a two-panel figure near 1,100 px wide: sharp on screen, small enough to embed.
DPI = 100


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
    """PNG-encode a Figure with savefig; the pixel size goes into the img tag so the layout does not jump."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    png = buffer.getvalue()
    # A PNG's first chunk (IHDR, after the 8-byte signature and the chunk's length and type) starts with
    # its width and height, big-endian: the size as drawn, whatever savefig rounded.
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    return RenderedFigure(name, caption, png, width, height)


def render_html(context: dict[str, Any], template: str = REPORT_PAGE) -> str:
    """A page from reports/report/templates/ (the report; `history.html.j2` for `fsdp-bench history`);
    a missing context key is an error, not blank."""
    return load_template(template).render(**context)


def load_template(name: str) -> Template:
    """A template compiled, once per process (the report compiles its page while its figures are
    drawn in a worker pool, not after them)."""
    return _environment().get_template(name)


@functools.cache
def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined, keep_trailing_newline=True
    )
    env.globals["table_html"] = table_html
    return env


def table_html(table: Any, css: str = "") -> Markup:
    """A Table (reports/report/tables.py) as an HTML table, every header and cell escaped.

    The `table` macro of templates/_macros.html.j2 calls this: the same text a Jinja loop over the
    cells writes, at a fraction of its cost for a 10,000-row results table. A table whose rows were
    written ahead (`rows_written`) has them placed as they were written."""
    head = "".join(f"<th>{escape(column)}</th>" for column in table.columns)
    body = table.body if isinstance(table, RowsWritten) else _body(table)
    return Markup(
        f'<table class="{escape(css)}">\n  <thead><tr>{head}</tr></thead>\n  <tbody>{body}\n  </tbody>\n</table>'
    )


class RowsWritten:
    """A Table with its rows' markup written now (what `table_html` would write of them): the report
    writes its tables' rows while a worker pool still draws its figures, and the page, rendered once
    the figures are in, only places them. The table's columns, rows and row classes stay readable, as the page reads them; a row
    added after this is not on the page."""

    def __init__(self, table: Any) -> None:
        self.columns, self.rows, self.row_classes = table.columns, table.rows, table.row_classes
        self.body = _body(table)


def rows_written(context: dict[str, Any]) -> dict[str, Any]:
    """The page's context with each of its tables (the Tables among its values) as RowsWritten."""
    from reports.report.table import Table

    return {key: RowsWritten(value) if isinstance(value, Table) else value for key, value in context.items()}


def _body(table: Any) -> str:
    """A table's rows as markup, every cell escaped."""
    return _body_escaped_at_once(table) or "".join(
        _row_start(css_class) + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
        for row, css_class in zip(table.rows, table.row_classes)
    )


def _row_start(css_class: str) -> str:
    return f'\n    <tr class="{escape(css_class)}">' if css_class else "\n    <tr>"


# Stand-ins for the markup between cells and between rows, joined into one text that is escaped in
# one call (escaping leaves control characters alone) and then replaced by the markup.
_CELL, _ROW = "\x1f", "\x1e"


def _body_escaped_at_once(table: Any) -> str | None:
    """The rows' markup with every cell escaped, from one escape of all the cells (not one call of
    `escape` per cell); None where that is not the same text: a cell that is not a
    plain string (escape would ask it for its own HTML) or that holds a stand-in character."""
    rows = table.rows
    if not rows or not all(type(cell) is str for row in rows for cell in row):
        return None
    text = _ROW.join(_CELL.join(row) for row in rows)
    if text.count(_CELL) + text.count(_ROW) != sum(max(len(row) - 1, 0) for row in rows) + len(rows) - 1:
        return None
    escaped = str(escape(text)).split(_ROW)
    return "".join(
        _row_start(css_class) + (f"<td>{cells.replace(_CELL, '</td><td>')}</td>" if row else "") + "</tr>"
        for row, css_class, cells in zip(rows, table.row_classes, escaped)
    )
