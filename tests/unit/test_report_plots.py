"""Plots built from fixture records: series, ideal lines, axes and legends, read off the Figure objects."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, sample_sweep, scaling_records  # noqa: E402

from bench.analysis.report.views import analyse  # noqa: E402
from reports.report import plots  # noqa: E402


@pytest.fixture(scope="module")
def analysis():
    return analyse(sample_sweep())


def _lines(ax, prefix):
    return {line.get_gid(): line for line in ax.get_lines() if (line.get_gid() or "").startswith(prefix)}


def _legend_texts(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_throughput_has_one_line_per_series_and_its_ideal_line(analysis):
    fig = plots.throughput_figure(analysis.scaling)
    (ax,) = fig.axes
    series = _lines(ax, "series:")
    assert len(series) == 2
    by_label = {line.get_label(): line for line in series.values()}
    full = by_label["full_shard · batch 1/dev (weak)"]
    np.testing.assert_allclose(full.get_xdata(), [1, 2, 4])
    np.testing.assert_allclose(full.get_ydata(), [1000, 1900, 3400])
    ideal = _lines(ax, "ideal:")[full.get_gid().replace("series", "ideal")]
    np.testing.assert_allclose(ideal.get_ydata(), [1000, 2000, 4000])  # linear from the 1-node baseline
    assert ideal.get_linestyle() == "--"
    assert ideal.get_color() == full.get_color()
    no_shard = by_label["no_shard · batch 1/dev (weak)"]
    np.testing.assert_allclose(
        _lines(ax, "ideal:")[no_shard.get_gid().replace("series", "ideal")].get_ydata(), [1100, 2200, 4400]
    )


def test_throughput_axes_are_labelled_log2_and_legend_sits_outside(analysis):
    (ax,) = plots.throughput_figure(analysis.scaling).axes
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert ax.get_xlabel() == "nodes (log2 scale)"
    assert "tokens/s" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]
    assert "ideal (dashed, from the baseline)" in _legend_texts(ax)
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 > 1.0  # to the right of the data area, never over it
    assert ax.get_title() == "debug"


def test_series_use_distinct_okabe_ito_colours(analysis):
    (ax,) = plots.throughput_figure(analysis.scaling).axes
    colours = [line.get_color() for line in _lines(ax, "series:").values()]
    assert len(set(colours)) == len(colours)
    assert set(colours) <= set(plots.PALETTE)


def test_efficiency_plot_in_percent_with_the_100_percent_line(analysis):
    (ax,) = plots.efficiency_figure(analysis.scaling).axes
    by_label = {line.get_label(): line for line in _lines(ax, "series:").values()}
    np.testing.assert_allclose(by_label["full_shard · batch 1/dev (weak)"].get_ydata(), [100, 95, 85])
    ideal = _lines(ax, "ideal:100")["ideal:100"]
    np.testing.assert_allclose(ideal.get_ydata(), [100, 100])
    assert ax.get_ylabel() == "scaling efficiency (%)"
    assert "ideal (100 % = linear)" in _legend_texts(ax)


def test_tokens_per_device_ideal_is_flat_at_the_baseline(analysis):
    (ax,) = plots.per_device_figure(analysis.scaling).axes
    by_label = {line.get_label(): line for line in _lines(ax, "series:").values()}
    full = by_label["full_shard · batch 1/dev (weak)"]
    np.testing.assert_allclose(full.get_ydata(), [1000, 950, 850])
    np.testing.assert_allclose(
        _lines(ax, "ideal:")[full.get_gid().replace("series", "ideal")].get_ydata(), [1000, 1000, 1000]
    )


def test_mfu_plot_in_percent_and_absent_without_mfu(analysis):
    (ax,) = plots.mfu_figure(analysis.scaling).axes
    values = sorted(tuple(line.get_ydata()) for line in _lines(ax, "series:").values())
    np.testing.assert_allclose(values, [[41, 41, 41], [45, 45, 45]])
    assert ax.get_ylabel() == "MFU (% of peak FLOP/s)"
    assert plots.mfu_figure(analyse(scaling_records({1: 1.0, 2: 2.0})).scaling) is None


def test_memory_bars_per_node_count_with_the_capacity_line(analysis):
    (ax,) = plots.memory_figure(analysis.points).axes
    bars = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert sorted(bars) == ["1 node", "2 nodes", "4 nodes"]
    assert bars["1 node"] == pytest.approx([2.0, 2.0])  # full_shard, no_shard at 2 GiB
    capacity = _lines(ax, "capacity:")
    assert len(capacity) == 2
    for line in capacity.values():
        np.testing.assert_allclose(line.get_ydata(), [16.0, 16.0])
    assert "device capacity" in _legend_texts(ax)
    assert ax.get_ylabel() == "peak memory per device (GiB)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["full_shard", "no_shard"]
    assert ax.get_title() == "debug"


def test_memory_plot_without_capacity_draws_no_line():
    points = analyse(scaling_records({1: 1.0, 2: 2.0})).points.assign(device_memory_bytes=float("nan"))
    (ax,) = plots.memory_figure(points).axes
    assert _lines(ax, "capacity:") == {}


def test_step_time_boxes_one_per_configuration_and_node_count(analysis):
    (ax,) = plots.step_time_figure(analysis.points, analysis.scaling).axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 6
    assert labels[0] == "full_shard · batch 1/dev (weak) · 1 node"
    assert ax.get_title() == "Step-time distributions"
    assert ax.get_xlabel() == "step time (s), timed steps only"


def test_panels_per_model_and_at_most_eight_series_each():
    records = []
    for model in ("debug", "tiny"):
        for batch in range(1, 11):  # ten configurations per model
            records += scaling_records({1: 100.0 * batch, 2: 190.0 * batch}, model=model, micro_batch=batch)
    fig = plots.throughput_figure(analyse(records).scaling)
    assert [ax.get_title() for ax in fig.axes] == [
        "debug (8 of 10 configurations shown)",
        "tiny (8 of 10 configurations shown)",
    ]
    kept = [line.get_label() for line in _lines(fig.axes[0], "series:").values()]
    assert (
        "full_shard · batch 10/dev (weak)" in kept and "full_shard · batch 1/dev (weak)" not in kept
    )  # the fastest are kept


def test_all_figures_skips_plots_without_data():
    analysis = analyse([make_record(nodes=1, tokens_per_s=100.0, peak_mem_bytes=None)])
    names = list(plots.all_figures(analysis.points, analysis.scaling))
    assert names == ["throughput", "tokens_per_device", "step_times"]


def _pngs(figures) -> list[tuple[str, bytes]]:
    return [(f.name, f.png) for f in figures]


def test_figures_drawn_by_a_worker_pool_are_the_figures_drawn_here(analysis):
    from bench.analysis.pool import worker_pool
    from reports.report.render import FIGURE_MODULES, render_figures

    here = render_figures(analysis.points, analysis.scaling)
    assert [f.name for f in here] == ["throughput", "efficiency", "tokens_per_device", "mfu", "memory", "step_times"]
    with worker_pool(FIGURE_MODULES, workers=2) as pool:
        assert pool is not None
        assert _pngs(render_figures(analysis.points, analysis.scaling, pool)) == _pngs(here)


def test_the_report_pipeline_loads_no_matplotlib_until_it_draws():
    """Importing the `report` command and the report's builder loads no matplotlib: a big report's
    figures are drawn by a worker pool (reports/report/render.py), which imports it, so the command's
    own process does not; a small report's are drawn in this process, which imports it then."""
    import subprocess

    modules = ["bench.cli.commands.report", "reports.report.build", "reports.report.render"]
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint('matplotlib' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_figures_submitted_as_their_frames_are_built_draw_what_is_drawn_here(analysis):
    """The report's order: the records' frame as soon as `analyse` has it (the memory figure is drawn
    from it), the scaling frame as soon as it has that (the line figures), then the points' frame;
    the same PNGs as drawn here from the finished frames."""
    from bench.analysis.pool import worker_pool
    from reports.report.plots import RECORD_FIGURES, SCALING_FIGURES
    from reports.report.render import FIGURE_MODULES, Figures, figure_names, render_figures

    assert set(RECORD_FIGURES) | set(SCALING_FIGURES) < set(figure_names())
    with worker_pool(FIGURE_MODULES, workers=2) as pool:
        figures = Figures(pool)
        late = analyse(sample_sweep(), on_frame=figures.records_frame, on_scaling=figures.scaling_frame)
        figures.points_frame(late.points, late.scaling)
        early = figures.collect()
    assert _pngs(early) == _pngs(render_figures(analysis.points, analysis.scaling))


def test_figures_of_the_early_frames_wait_for_the_points_frame_while_the_pool_starts(analysis):
    """While the pool's first worker is starting (a task given to it would wait for that, and so would
    the report), the records' and the scaling frame's figures are submitted with the points' frame:
    the same PNGs."""
    import multiprocessing

    from bench.analysis.pool import WorkerPool, start_method
    from reports.report.render import Figures, figure_names, render_figures

    class Starting(WorkerPool):
        """Its first worker starting until the points' frame comes; the names of the figures submitted."""

        still, submitted = True, []

        def starting(self) -> bool:
            return self.still

        def submit(self, function, *args):
            self.submitted.append(args[-1])
            return super().submit(function, *args)

    with Starting(2, mp_context=multiprocessing.get_context(start_method())) as pool:
        figures = Figures(pool)
        late = analyse(sample_sweep(), on_frame=figures.records_frame, on_scaling=figures.scaling_frame)
        assert pool.submitted == []
        pool.still = False
        figures.points_frame(late.points, late.scaling)
        assert pool.submitted == figure_names()
        drawn = figures.collect()
    assert _pngs(drawn) == _pngs(render_figures(analysis.points, analysis.scaling))


def test_the_scaling_figures_read_no_points(analysis):
    """plots.SCALING_FIGURES are drawn before the points frame exists: the same PNGs without it."""
    from reports.report.plots import SCALING_FIGURES
    from reports.report.render import draw

    for name in SCALING_FIGURES:
        alone, full = draw(None, analysis.scaling, name), draw(analysis.points, analysis.scaling, name)
        assert (alone is None) == (full is None) and (alone is None or alone.png == full.png), name
    assert draw(None, analysis.scaling, "throughput") is not None  # the sample draws it


def test_the_figures_of_a_pool_whose_workers_died_are_drawn_here(analysis):
    from dying_pool import dying_pool

    from reports.report.render import figure_names, render_figures

    here = render_figures(analysis.points, analysis.scaling)
    with dying_pool() as pool, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _pngs(render_figures(analysis.points, analysis.scaling, pool)) == _pngs(here)
    named = [
        re.match(r"drawing the (\w+) figure (failed in|was not given to) a worker", str(w.message)) for w in caught
    ]
    assert all(named) and [m[1] for m in named] == figure_names()


def test_a_figure_that_fails_in_its_worker_and_here_raises_its_error_here(analysis):
    """A figure's own error (here: a scaling frame without its models) is raised by the report, as it
    would be without a pool, after the worker's failure is named."""
    from bench.analysis.pool import worker_pool
    from reports.report.render import FIGURE_MODULES, render_figures

    broken = analysis.scaling.drop(columns=["model"])
    with worker_pool(FIGURE_MODULES, workers=2) as pool:
        with pytest.warns(UserWarning, match=r"drawing the throughput figure failed in a worker process \(KeyError"):
            with pytest.raises(KeyError, match="model"):
                render_figures(analysis.points, broken, pool)
    with pytest.raises(KeyError, match="model"):
        render_figures(analysis.points, broken)


def test_ci_bars_draw_the_pixels_of_matplotlib_errorbar():
    """The line figures' interval bars are two artists, not errorbar's four: the same PNG, a point
    without an interval (NaN bounds, drawn as errorbar draws a zero error) included."""
    from reports.report.html import render_figure
    from reports.style import single_axes

    x, y = np.array([1.0, 2.0, 4.0, 8.0]), np.array([1000.0, 1900.0, 3400.0, 6000.0])
    low, high = y * np.array([0.9, 0.95, np.nan, 0.8]), y * np.array([1.05, 1.2, np.nan, 1.1])

    def png(bars) -> bytes:
        fig, ax = single_axes(4, 3, left=0.8, right=0.2, bottom=0.5)
        ax.plot(x, y, color="#0072B2", marker="o")
        bars(ax)
        ax.set_xlim(0.5, 10)
        ax.set_ylim(500, 7000)
        return render_figure("ci", "", fig).png

    yerr = np.nan_to_num([y - low, high - y])
    errorbar = png(lambda ax: ax.errorbar(x, y, yerr=yerr, fmt="none", ecolor="#0072B2", capsize=3))
    assert png(lambda ax: plots.interval_bars(ax, x, y, low, high, "#0072B2")) == errorbar


def test_value_axes_build_only_the_ticks_in_view_and_draw_the_same_pixels():
    from matplotlib.ticker import LogLocator

    from reports.report.html import render_figure

    scaling = analyse(scaling_records({1: 100.0, 2: 190.0, 4: 360.0, 8: 700.0, 16: 1300.0})).scaling

    def drawn(plain: bool):
        fig = plots.throughput_figure(scaling)
        (ax,) = fig.axes
        if plain:  # the locator value_axis wraps, alone
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        return ax, render_figure("throughput", "", fig).png

    (ax, png), (plain_ax, plain_png) = drawn(False), drawn(True)
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    assert list(ax.yaxis.get_majorticklocs()) == [100, 200, 500, 1000]  # the 1-2-5 ticks in (~72, ~1810)
    assert all(low <= tick <= high for tick in ax.yaxis.get_majorticklocs())
    assert len(plain_ax.yaxis.get_majorticklocs()) > 4  # the plain locator's decade beyond each end
    assert png == plain_png


def test_startup_per_point_grows_with_nodes_one_line_per_configuration():
    from bench.analysis.report.frame import records_to_frame
    from bench.schema.job import JobMetrics

    records = [make_record(nodes=n, strategy=s) for n in (1, 2, 4) for s in ("full_shard", "no_shard")]
    assert plots.startup_figure(records_to_frame(records)) is None  # no record measured its job
    for record in records:
        record.metrics.job = JobMetrics(wall_s=60.0, startup_s=10.0 + record.spec.nodes)
    (ax,) = plots.startup_figure(records_to_frame(records)).axes
    lines = _lines(ax, "startup:")
    assert sorted(lines) == ["startup:full_shard:fp32", "startup:no_shard:fp32"]
    for line in lines.values():
        np.testing.assert_allclose(line.get_xdata(), [1, 2, 4])
        np.testing.assert_allclose(line.get_ydata(), [11.0, 12.0, 14.0])
