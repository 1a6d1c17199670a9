"""The one shape of a page table: column headers, rows of plain-text cells, a CSS class per row.

Apart from reports/report/tables.py's builders (which read pandas frames), so pages drawn
without pandas (history.html, reports/history/draw.py) render their tables with it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    """Column headers, rows of strings, and a CSS class per row ("" or "flag")."""

    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    row_classes: list[str] = field(default_factory=list)

    def add(self, cells: list[str], css: str = "") -> None:
        self.rows.append(cells)
        self.row_classes.append(css)
