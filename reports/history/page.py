"""write_history: OUT/history.html (self-contained, like the report) + one PNG per series +
OUT/summary.md + OUT/history.xml (JUnit).

The page reuses the report's building blocks: reports/report/html.py (PNG encoding, data URIs, Jinja2 with
autoescaping), its table macro and Table, and reports/report/plots.py's palette.

This module is light on purpose (no matplotlib, pandas or Jinja2): what the page shows is gathered
as plain data (reports/history/inputs.py), and reports/history/draw.py, which imports the
drawing libraries, draws the figures and renders the page from it, in a process the command starts
before it reads the store (reports/history/drawing.py), or here where that cannot run.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from bench.analysis.history.analyse import History
from bench.analysis.history.build import HistoryQuery
from bench.schema.files import write_bytes_atomic, write_text_atomic
from reports.history.inputs import page_inputs
from reports.history.outputs import write_history_junit, write_summary


def write_history(history: History, out: Path, *, store: str, command: str, drawing=None) -> Path:
    """Write every output of `history` into `out`; returns the path of history.html. `drawing`: the
    process that draws the page (reports/history/drawing.py), started early; None draws here.
    summary.md and history.xml are written while the figures are drawn."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = page_inputs(history, store=store, command=command)
    if drawing is not None:
        drawing.send(inputs)
    write_summary(history, out / "summary.md", store=store)
    write_history_junit(history, out / "history.xml")
    if drawing is not None:
        figures, html = drawing.receive()
    else:
        from reports.history.draw import render_page

        figures, html = render_page(inputs)
    for name, png in figures:
        write_bytes_atomic(out / name, png)
    page = out / "history.html"
    write_text_atomic(page, html)
    return page


def reproduce_command(query: HistoryQuery, out: Path) -> str:
    """The command line that makes this page again (shown on it)."""
    words = ["fsdp-bench", "history", "--store", str(query.store), "--metric", query.metric, "-o", str(out)]
    for flag, value in (("--since", query.since), ("--series", query.series)):
        words += [flag, value] if value else []
    if query.window is not None:
        words += ["--fail-on-new-regression", str(query.window)]
    words += ["--no-numerics"] if not query.numerics else ["--loss-rtol", f"{query.loss_rtol:g}"]
    return shlex.join(words)
