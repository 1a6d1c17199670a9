"""write_history: OUT/history.html (self-contained, like the report) + one PNG per series +
OUT/summary.md + OUT/history.xml (JUnit).

The page reuses the report's building blocks: reports/report/html.py (PNG encoding, data URIs, Jinja2 with
autoescaping), its table macro and Table, and reports/report/plots.py's palette.

What the page shows is gathered as plain data (reports/history/inputs.py), from which
reports/history/draw.py draws the figures (each a task of a worker pool where there are enough) and
renders the page.
"""

from __future__ import annotations

import shlex
from concurrent.futures import Executor
from pathlib import Path

from bench.analysis.history.analyse import History
from bench.analysis.history.build import HistoryQuery
from bench.schema.files import write_bytes_atomic, write_text_atomic
from reports.history.draw import SeriesFigures, render_page
from reports.history.inputs import page_inputs
from reports.history.outputs import write_history_junit, write_summary


def write_history(history: History, out: Path, *, store: str, command: str, pool: Executor | None = None) -> Path:
    """Write every output of `history` into `out`; returns the path of history.html. `pool`: the
    workers that draw the figures where there are enough of them (None: drawn here); summary.md and
    history.xml are written while they draw."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = page_inputs(history, store=store, command=command)
    drawing = SeriesFigures(inputs.plotted, pool)
    write_summary(history, out / "summary.md", store=store)
    write_history_junit(history, out / "history.xml")
    figures = drawing.collect()
    for figure in figures:
        write_bytes_atomic(out / f"{figure.name}.png", figure.png)
    page = out / "history.html"
    write_text_atomic(page, render_page(inputs, figures))
    return page


def reproduce_command(query: HistoryQuery, out: Path) -> str:
    """The command line that makes this page again (shown on it)."""
    words = ["fsdp-bench", "history", "--store", str(query.store), "--metric", query.metric, "-o", str(out)]
    for flag, value in (("--since", query.since), ("--series", query.series)):
        words += [flag, value] if value else []
    if query.window is not None:
        words += ["--fail-on-new-regression", str(query.window)]
    words += ["--target-shift", f"{query.target_shift * 100:g}%"] + (
        ["--fail-on-ungated"] if query.fail_on_ungated else []
    )
    words += ["--no-numerics"] if not query.numerics else ["--loss-rtol", f"{query.loss_rtol:g}"]
    return shlex.join(words)
