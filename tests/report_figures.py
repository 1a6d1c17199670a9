"""The report's figures of the sample sweep as PNG bytes, for the tests of the figure workers' memos
(reports/text_glyphs.py, tick_copies.py, marker_styles.py, legend_packing.py): each draws them
with matplotlib's own, then with its memo, and compares the bytes."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "records"))
from record_factory import sample_sweep  # noqa: E402


@functools.cache
def _analysis():
    from bench.analysis.report.views import analyse

    return analyse(sample_sweep())


def report_pngs() -> dict[str, bytes | None]:
    """Every figure the report may draw, by name: its PNG, or None where the sample has nothing for it."""
    from reports.report.render import draw, figure_names

    analysis = _analysis()
    figures = {name: draw(analysis.points, analysis.scaling, name) for name in figure_names()}
    return {name: None if figure is None else figure.png for name, figure in figures.items()}


def assert_the_same_bytes_once_installed(install, figure_png) -> None:
    """`figure_png()` (a figure's PNG) and the report's figures drawn by matplotlib's own, then after
    `install()` (installing twice being installing once), twice (with what a memo makes, then with what
    it keeps): the same bytes each time."""
    matplotlibs, report = figure_png(), report_pngs()
    assert sum(png is not None for png in report.values()) >= 4
    assert install() and install()
    for _ in range(2):
        assert figure_png() == matplotlibs
        assert report_pngs() == report
