"""Plots built from fixture records: series, ideal lines, axes and legends, read off the Figure objects."""

from __future__ import annotations

import sys
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


def test_parallel_rendering_gives_the_same_pngs_as_serial(analysis):
    from reports.report.render import render_figures

    serial = render_figures(analysis.points, analysis.scaling, workers=1)
    parallel = render_figures(analysis.points, analysis.scaling, workers=2)
    assert [f.name for f in serial] == ["throughput", "efficiency", "tokens_per_device", "mfu", "memory", "step_times"]
    assert [(f.name, f.png) for f in parallel] == [(f.name, f.png) for f in serial]


def test_the_report_pipeline_loads_no_matplotlib_until_it_draws():
    """The `report` command's process only writes tables and the page: its figure workers import
    matplotlib (reports/report/render.py), so the parent must not load it on import."""
    import subprocess

    modules = ["bench.cli.commands.report", "reports.report.build", "reports.report.render"]
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint('matplotlib' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_figure_workers_started_before_the_data_draw_what_the_parent_would(analysis):
    """The `report` command's order: start (no data yet), the records' frame as soon as `analyse`
    has it (the memory figure is drawn from it), the scaling frame as soon as it has that (the line
    figures), submit, collect; same PNGs as drawn here."""
    from reports.report.plots import SCALING_FIGURES
    from reports.report.render import FigureWorkers, draw_order, render_figures

    order = draw_order()
    assert order[:2] == ["memory", "checkpoint"]  # the figures of the records' frame go first
    assert order[2:7] == list(SCALING_FIGURES) and order[7:] == ["step_times"]  # then the scaling frame's
    with FigureWorkers.start(2) as workers:
        late = analyse(sample_sweep(), on_frame=workers.submit_records, on_scaling=workers.submit_scaling)
        workers.submit(late.points, late.scaling)
        early = workers.collect()
    assert [(f.name, f.png) for f in early] == [
        (f.name, f.png) for f in render_figures(analysis.points, analysis.scaling, workers=1)
    ]


def test_the_scaling_figures_read_no_points(analysis):
    """plots.SCALING_FIGURES are drawn before the points frame exists: the same PNGs without it."""
    from reports.report.plots import SCALING_FIGURES
    from reports.report.render import draw

    for name in SCALING_FIGURES:
        alone, full = draw(None, analysis.scaling, name), draw(analysis.points, analysis.scaling, name)
        assert (alone is None) == (full is None) and (alone is None or alone.png == full.png), name
    assert draw(None, analysis.scaling, "throughput") is not None  # the sample draws it


def test_figure_workers_closed_with_a_frame_still_being_sent_leave_no_thread():
    """The records' frame goes to each worker on a thread of its own (a worker importing matplotlib
    takes it only when it is done). Closed before collect, with megabytes still to send: the workers
    are stopped, every sending thread ends, and this process may fork again (no thread left)."""
    import threading

    import pandas as pd

    from bench.analysis.forking import can_fork
    from reports.report.render import FigureWorkers

    big = pd.DataFrame({"model": [f"model-{i}" * 20 for i in range(40_000)]})  # a few MB: more than a pipe holds
    workers = FigureWorkers.start(2)
    workers.submit_records(big)
    assert threading.active_count() > 1  # a frame of megabytes still being sent
    workers.close()
    assert threading.active_count() == 1 and can_fork()


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


def test_submit_takes_only_the_scaling_frame_the_workers_were_sent(analysis):
    """After submit_scaling, the frames collect would draw from are the ones the workers have."""
    from reports.report.render import FigureWorkers

    with FigureWorkers.start(1) as workers:  # none forked: what is checked is the bookkeeping
        workers.submit_scaling(analysis.scaling)
        with pytest.raises(ValueError, match="other than the one submit_scaling sent"):
            workers.submit(analysis.points, analysis.scaling.copy())
        workers.submit(analysis.points, analysis.scaling)
        assert [f.name for f in workers.collect()][:2] == ["throughput", "efficiency"]


@pytest.mark.parametrize("start", ["early", "late", "serial"])
def test_a_figure_worker_formats_results_csv_lines(analysis, tmp_path, start):
    """Started early, the workers get the records' frame first: one of them formats results.csv's lines of
    its columns (`csv_rows` after collect, the lines this process would format), and the file written
    with them is the file written without. Started late (only `submit`), the points' frame: every
    column's lines. No worker forked: no lines, the file formatted whole."""
    from bench.analysis.report.export import csv_columns, csv_rows, write_csv
    from reports.report.render import FigureWorkers, render_figures

    with FigureWorkers.start(1 if start == "serial" else 2) as figure_workers:
        if start == "early":
            late = analyse(
                sample_sweep(), on_frame=figure_workers.submit_records, on_scaling=figure_workers.submit_scaling
            )
        else:
            late = analyse(sample_sweep())
        figure_workers.submit(late.points, late.scaling)
        figures = figure_workers.collect()
    assert [(f.name, f.png) for f in figures] == [
        (f.name, f.png) for f in render_figures(analysis.points, analysis.scaling, workers=1)
    ]
    if start == "serial":
        assert figure_workers.csv_rows is None
        return
    names, lines = figure_workers.csv_rows
    analysed = ["series", "scaling_mode", "baseline_nodes", "speedup", "scaling_efficiency", "below_prediction",
                "contention"]  # fmt: skip
    assert "hostnames" in names
    assert csv_columns(late.points) == (names + analysed if start == "early" else names)
    assert (names, lines) == csv_rows(late.points[names])
    with_lines = write_csv(late.points, tmp_path / "with.csv", leading=figure_workers.csv_rows).read_bytes()
    assert with_lines == write_csv(late.points, tmp_path / "whole.csv").read_bytes()
    assert with_lines.count(b"\n") == len(late.points) + 1
