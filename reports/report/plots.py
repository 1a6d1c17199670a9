"""Plots: pure functions from the aggregated DataFrames to matplotlib Figures (Agg backend).

Each function returns a Figure (or None when the report has nothing to show for it, e.g.
MFU on CPU), never writes files: reports/report/html.py encodes them. Tests inspect the returned
Figure's lines and labels, not pixels.

Conventions: one panel per model; at most MAX_SERIES series per panel (the fastest at their
largest node count; the tables list every point); node axes log2; Okabe-Ito colours with a
distinct marker per series, so lines stay apart in greyscale and for colour-blind readers;
legends outside the axes so they never cover data.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")  # no display: reports render on headless CI runners and cluster login nodes

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from bench.analysis.report.aggregate import GROUP_KEYS  # noqa: E402
from bench.schema.metrics import get  # noqa: E402
from bench.schema.units import GIB  # noqa: E402
from reports.report.breakdown import MEASURED_PARTS, NO_PREDICTION, PREDICTED_PARTS  # noqa: E402
from reports.report.labels import config_label, series_labels  # noqa: E402
from reports.style import (  # noqa: E402
    BOTTOM_IN,
    IDEAL_STYLE,
    LEFT_IN,
    LEGEND_IN,
    MARKERS,
    MAX_SERIES,
    PALETTE,
    PANEL_HEIGHT_IN,
    PANEL_WIDTH_IN,
    TOP_IN,
    legend_outside,
    log2_nodes,
    shorten,
    single_axes,
    value_axis,
)

MAX_PANELS = 12
MAX_BOXES = 40


def throughput_figure(scaling: pd.DataFrame) -> Figure | None:
    """Tokens/s vs nodes per series, each with its ideal-linear line from the baseline."""
    return _line_figure(
        scaling,
        "tokens_per_s",
        "throughput (tokens/s)",
        _throughput_ideal,
        log_y=True,
        ci=("tps_ci_low", "tps_ci_high"),
    )


def per_device_figure(scaling: pd.DataFrame) -> Figure | None:
    """Tokens/s per device vs nodes; ideal scaling keeps it flat at the baseline's value."""
    return _line_figure(
        scaling, "tokens_per_s_per_device", "tokens/s per device", _per_device_ideal, ci=("tpsd_ci_low", "tpsd_ci_high")
    )


def efficiency_figure(scaling: pd.DataFrame) -> Figure | None:
    """Scaling efficiency (%) vs nodes with the 100 % line; series of one node count are left out."""
    scaling = _narrow(scaling, ["scaling_efficiency", "eff_ci_low", "eff_ci_high"])
    scaled = scaling[scaling["mode"] != "single"].assign(
        efficiency_pct=lambda d: d["scaling_efficiency"] * 100,
        eff_low_pct=lambda d: d["eff_ci_low"] * 100,
        eff_high_pct=lambda d: d["eff_ci_high"] * 100,
    )
    # Its legend is built once the 100 % line is there (a legend built before would be thrown away).
    fig = _line_figure(
        scaled, "efficiency_pct", "scaling efficiency (%)", None, ci=("eff_low_pct", "eff_high_pct"), legend=False
    )
    if fig is not None:
        for ax in fig.axes:
            ax.axhline(100, color="grey", gid="ideal:100", **IDEAL_STYLE)
            ax.set_ylim(0, max(110, ax.get_ylim()[1]))
            legend_outside(ax, ["ideal (100 % = linear)"])
    return fig


def mfu_figure(scaling: pd.DataFrame) -> Figure | None:
    """MFU (%) vs nodes: where model FLOPs utilisation falls off. None when no point has MFU."""
    scaling = _narrow(scaling, ["mfu"])
    return _line_figure(
        scaling[scaling["mfu"].notna()].assign(mfu_pct=lambda d: d["mfu"] * 100),
        "mfu_pct",
        "MFU (% of peak FLOP/s)",
        None,
    )


def energy_figure(scaling: pd.DataFrame) -> Figure | None:
    """Energy per token (J) vs nodes, repeats' median: the cost of scaling out. None when no point has it."""
    energy = get("energy_per_token")
    return _line_figure(scaling, energy.key, f"{energy.label} ({energy.unit.split('/')[0]})", None)


def _throughput_ideal(line: dict[str, np.ndarray]) -> np.ndarray:
    return line["tokens_per_s"][0] * line["nodes"] / line["nodes"][0]


def _per_device_ideal(line: dict[str, np.ndarray]) -> np.ndarray:
    return np.full(len(line["nodes"]), line["tokens_per_s_per_device"][0])


def _line_figure(scaling, column, ylabel, ideal, log_y=False, ci=None, legend=True) -> Figure | None:
    """One panel per model: a line per series; `ideal(line)` gives the dashed ideal line. `legend`:
    False leaves each panel's legend to the caller."""
    data = _narrow(scaling, [column, *(ci or ())])
    data = data[data[column].notna()]
    if data.empty:
        return None
    fig, axes = panels(sorted(data["model"].unique()))
    for ax, (model, panel) in zip(axes, data.groupby("model", sort=True)):
        shown = _top_series(panel)
        labels = series_labels(panel, only=shown)
        arrays = _panel_arrays(panel, [column, *(ci or ())])
        for index, line in enumerate(_series_lines(arrays, shown)):
            series = line["series"][0]
            style = {"color": PALETTE[index % MAX_SERIES], "marker": MARKERS[index % MAX_SERIES]}
            x, y = line["nodes"].astype(float), line[column]
            ax.plot(x, y, label=shorten(labels[int(series)]), gid=f"series:{series}", **style)
            if ci is not None:
                interval_bars(ax, x, y, line[ci[0]], line[ci[1]], style["color"], gid=f"ci:{series}")
            if ideal is not None and len(y) > 1:
                ax.plot(x, ideal(line), color=style["color"], gid=f"ideal:{series}", label="_ideal", **IDEAL_STYLE)
        _finish_axes(ax, panel, model, len(shown), ylabel, log_y, ideal is not None, legend)
    return fig


# What the line figures read besides the plotted column: the series' identity and ranking, the
# ideal lines' baselines and the legend labels' keys (reports/report/labels.py series_labels).
_LINE_COLUMNS = ["model", "series", "nodes", "mode", "tokens_per_s", "tokens_per_s_per_device", "micro_batch",
                 "grad_accum", "global_batch", *GROUP_KEYS]  # fmt: skip
# What a line is drawn from: its identity, x, and the ideal lines' baselines (as floats).
_DRAWN_COLUMNS = {"series": None, "nodes": None, "tokens_per_s": float, "tokens_per_s_per_device": float}


def _narrow(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Only the columns a figure reads: every row selection and group after this copies a handful
    of columns instead of a hundred (most of the figures' pandas time at 10,000 points)."""
    return frame[list(dict.fromkeys(c for c in [*_LINE_COLUMNS, *columns] if c in frame.columns))]


def _panel_arrays(panel: pd.DataFrame, columns: list[str]) -> dict[str, np.ndarray]:
    """The panel's drawn columns as numpy arrays (plotted values as floats, NA as NaN), converted
    once: each line then takes its rows from these instead of filtering a DataFrame per series."""
    kinds = {**_DRAWN_COLUMNS, **dict.fromkeys(columns, float)}
    return {c: panel[c].to_numpy(dtype=kind) for c, kind in kinds.items() if c in panel.columns}


def _series_lines(arrays: dict[str, np.ndarray], shown: list) -> list[dict[str, np.ndarray]]:
    """The shown series' rows (each column an array) sorted by node count, series in order of first
    appearance: what `groupby("series", sort=False)` then `sort_values("nodes")` gives."""
    series, nodes = arrays["series"], arrays["nodes"]
    kept = np.flatnonzero(np.isin(series, shown))
    lines = []
    for value in pd.unique(series[kept]):
        positions = kept[series[kept] == value]
        order = positions[np.argsort(nodes[positions], kind="quicksort")]
        lines.append({c: values[order] for c, values in arrays.items()})
    return lines


def interval_bars(ax, x, y, low, high, color, gid=None) -> None:
    """95 % bootstrap CI bars where a point has repeats: the pixels of
    `ax.errorbar(x, y, yerr, fmt="none", ecolor=color, capsize=3)` from two artists, not the four it
    builds: its vertical bars as one line broken by NaN (butt ends, as its LineCollection draws them),
    and its bottom caps then its top caps as one line of cap markers (the order it draws them in).
    Error bars were a sixth of a line figure's time; each artist is a fixed cost, whatever it draws."""
    if np.isnan(low).all():
        return
    below, above = np.nan_to_num(y - low), np.nan_to_num(high - y)
    if (below < 0).any() or (above < 0).any():  # an interval that misses its median: errorbar refuses it
        raise ValueError("'yerr' must not contain negative values")
    bottom, top = y - below, y + above
    bars_x, bars_y = np.full((3, len(x)), np.nan), np.full((3, len(x)), np.nan)  # columns: bottom, top, break
    bars_x[:2], bars_y[0], bars_y[1] = x, bottom, top
    bars = {"color": color, "solid_capstyle": "butt", "zorder": 2, "label": "_nolegend_", "gid": gid}
    ax.add_line(Line2D(bars_x.ravel(order="F"), bars_y.ravel(order="F"), **bars))
    caps = {"marker": "_", "markersize": 6.0, "markeredgecolor": color, "color": "C0", "linestyle": "none", "zorder": 2}
    ax.add_line(Line2D(np.concatenate([x, x]), np.concatenate([bottom, top]), label="_nolegend_", **caps))


def _top_series(panel: pd.DataFrame) -> list:
    """The MAX_SERIES fastest series of a panel, ranked by tokens/s at their largest node count."""
    last = panel[["series", "nodes", "tokens_per_s"]].sort_values("nodes").groupby("series", sort=False).tail(1)
    return list(last.sort_values("tokens_per_s", ascending=False)["series"].head(MAX_SERIES))


def _finish_axes(ax, panel, model, shown, ylabel, log_y, has_ideal, legend) -> None:
    total = panel["series"].nunique()
    # y given explicitly: skips matplotlib's title auto-positioning (a text layout pass per panel).
    ax.set_title(model if shown == total else f"{model} ({shown} of {total} configurations shown)", y=1.0)
    log2_nodes(ax, panel["nodes"])
    ax.set_ylabel(ylabel)
    value_axis(ax, log_y)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        legend_outside(ax, ["ideal (dashed, from the baseline)"] if has_ideal else [])


def panels(models: list[str]) -> tuple[Figure, list]:
    """A figure with one panel per model, two columns, each with room for its legend on the right.

    Fixed geometry in inches, no layout engine: constrained layout re-measures every text of the
    figure, a large part of drawing a figure of many panels, for a layout that is fixed anyway.
    """
    shown = models[:MAX_PANELS]
    cols = 1 if len(shown) == 1 else 2
    rows = math.ceil(len(shown) / cols)
    cell_w, cell_h = LEFT_IN + PANEL_WIDTH_IN + LEGEND_IN, TOP_IN + PANEL_HEIGHT_IN + BOTTOM_IN
    width, height = cols * cell_w, rows * cell_h
    fig = Figure(figsize=(width, height))
    axes = []
    for index in range(len(shown)):
        row, col = divmod(index, cols)
        left = (col * cell_w + LEFT_IN) / width
        bottom = 1 - (row * cell_h + TOP_IN + PANEL_HEIGHT_IN) / height
        axes.append(fig.add_axes((left, bottom, PANEL_WIDTH_IN / width, PANEL_HEIGHT_IN / height)))
    return fig, axes


def memory_figure(points: pd.DataFrame) -> Figure | None:
    """Peak memory per device (GiB) per model panel: a bar group per strategy, a bar per node count,
    and the device capacity as a black line over each group where the cluster's capacity is known."""
    data = points.loc[
        points["peak_mem_bytes"].notna(), ["model", "strategy", "nodes", "peak_mem_bytes", "device_memory_bytes"]
    ]
    if data.empty:
        return None
    node_counts = sorted(data["nodes"].unique())
    fig, axes = panels(sorted(data["model"].unique()))
    for ax, (model, panel) in zip(axes, data.groupby("model", sort=True)):
        peak = panel.groupby(["strategy", "nodes"])["peak_mem_bytes"].max().unstack("nodes") / GIB
        capacity = panel.groupby("strategy")["device_memory_bytes"].max() / GIB
        _memory_bars(ax, peak.reindex(columns=node_counts), capacity)
        ax.set_title(model, y=1.0)
        ax.set_ylabel("peak memory per device (GiB)")
        ax.grid(True, axis="y", alpha=0.3)
        legend_outside(ax, [])
    return fig


def startup_figure(points: pd.DataFrame) -> Figure | None:
    """Start-up per point (metrics.job: program start-up, initialization and the first steps' excess,
    over every attempt) vs nodes, one line per strategy and precision in each model's panel."""
    if "job_startup_s" not in points.columns:
        return None
    data = points.loc[points["job_startup_s"].notna(), ["model", "strategy", "precision", "nodes", "job_startup_s"]]
    if data.empty:
        return None
    fig, axes = panels(sorted(data["model"].unique()))
    for ax, (model, panel) in zip(axes, data.groupby("model", sort=True)):
        for index, ((strategy, precision), line) in enumerate(panel.groupby(["strategy", "precision"], sort=True)):
            seconds = line.groupby("nodes")["job_startup_s"].median()
            ax.plot(seconds.index, seconds.to_numpy(), marker=MARKERS[index % len(MARKERS)],
                    color=PALETTE[index % MAX_SERIES], label=f"{strategy} {precision}",
                    gid=f"startup:{strategy}:{precision}")  # fmt: skip
        ax.set_title(model, y=1.0)
        ax.set_xlabel("nodes")
        ax.set_ylabel("start-up per point (s)")
        ax.grid(True, alpha=0.3)
        legend_outside(ax, [])
    return fig


def _memory_bars(ax, peak: pd.DataFrame, capacity: pd.Series) -> None:
    width = 0.8 / len(peak.columns)
    x = np.arange(len(peak.index))
    for index, nodes in enumerate(peak.columns):
        offsets = x - 0.4 + width * (index + 0.5)
        label = f"{int(nodes)} node{'s' if nodes > 1 else ''}"
        ax.bar(offsets, peak[nodes].to_numpy(), width, color=PALETTE[index % MAX_SERIES], label=label)
    labelled = False
    for position, strategy in enumerate(peak.index):
        if pd.notna(capacity.get(strategy)):
            label = "_nolegend_" if labelled else "device capacity"
            ax.plot(
                [position - 0.45, position + 0.45],
                [capacity[strategy]] * 2,
                color="black",
                linewidth=1.5,
                gid=f"capacity:{strategy}",
                label=label,
            )
            labelled = True
    ax.set_xticks(x, list(peak.index), rotation=15, ha="right", fontsize=8)


def step_time_figure(points: pd.DataFrame, scaling: pd.DataFrame) -> Figure | None:
    """Distribution of timed step times (s) per configuration and node count, repeats pooled."""
    every = _step_time_boxes(points, scaling)
    if not every:
        return None
    boxes = every[:MAX_BOXES]
    # Tick labels at 8 pt are ~0.062 in per character (DejaVu Sans): the left margin fits the longest.
    left = 0.3 + 0.062 * max(len(label) for label, _ in boxes)
    fig, ax = single_axes(6.5, 0.28 * len(boxes), left=left, right=0.3, bottom=0.55)
    ax.boxplot(
        [times for _, times in boxes],
        orientation="horizontal",
        tick_labels=[label for label, _ in boxes],
        flierprops={"markersize": 3},
    )
    ax.invert_yaxis()  # first configuration on top, like the tables
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("step time (s), timed steps only")
    ax.set_title(
        "Step-time distributions" + ("" if len(every) <= MAX_BOXES else f" (first {MAX_BOXES} of {len(every)})"), y=1.0
    )
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def _step_time_boxes(points: pd.DataFrame, scaling: pd.DataFrame) -> list[tuple[str, list[float]]]:
    """(label, pooled step times) per configuration and node count of the series the line plots show."""
    scaling = _narrow(scaling, [])
    shown = {s for _, panel in scaling.groupby("model") for s in _top_series(panel)}
    labels = series_labels(scaling, omit=(), only=shown)
    data = points.loc[
        points["series"].isin(shown) & points["step_times_s"].map(len).gt(0), ["series", "nodes", "step_times_s"]
    ]
    boxes = []
    for (series, nodes), group in data.groupby(["series", "nodes"], sort=True):
        times = [t for row in group["step_times_s"] for t in row]
        plural = "s" if nodes > 1 else ""
        boxes.append((f"{labels[int(series)]} · {int(nodes)} node{plural}", times))
    return boxes


# name -> (caption, builder(points, scaling)), in report order.
FIGURES = {
    "throughput": ("Throughput vs nodes; dashed: ideal linear scaling from each series' baseline",
                   lambda points, scaling: throughput_figure(scaling)),
    "efficiency": ("Scaling efficiency vs nodes (100 % = linear)", lambda points, scaling: efficiency_figure(scaling)),
    "tokens_per_device": ("Tokens/s per device vs nodes; dashed: the baseline's value (ideal)",
                          lambda points, scaling: per_device_figure(scaling)),
    "mfu": ("Model FLOPs utilisation vs nodes", lambda points, scaling: mfu_figure(scaling)),
    "energy": ("Energy per token vs nodes (telemetry: GPU board energy, or CPU package energy on CPU clusters)",
               lambda points, scaling: energy_figure(scaling)),
    "memory": ("Peak memory per device; black: device capacity", lambda points, scaling: memory_figure(points)),
    "step_times": ("Step-time distributions", lambda points, scaling: step_time_figure(points, scaling)),
    "checkpoint": ("Checkpoint save time vs size and bandwidth vs nodes; hollow and dashed: the planner's",
                   lambda points, scaling: _checkpoint_figure(points)),
    "startup": ("Start-up per point vs nodes (metrics.job: program start-up, initialization, the first steps' "
                "excess; a launch's first point holds the launch's)", lambda points, scaling: startup_figure(points)),
    "where_efficiency_went": ("Where the efficiency went: each profiled step split into compute, exposed communication "
                              "by collective and idle (solid), the planner's split (hatched), the ideal step (dashed)",
                              lambda points, scaling: where_efficiency_went_figure(scaling)),
}  # fmt: skip
# The figures whose builders read only the records' own columns (no series, efficiency or scaling
# row): with a worker pool they are drawn from the records' frame as soon as it is built, while the
# report still aggregates (reports/report/render.py).
RECORD_FIGURES = ("memory", "checkpoint", "startup")
# The figures whose builders read only the scaling frame (`points` may be None): with a worker pool
# they are drawn from it as soon as it is built, while each point still gets its series.
SCALING_FIGURES = ("throughput", "efficiency", "tokens_per_device", "mfu", "energy", "where_efficiency_went")


def where_efficiency_went_figure(scaling: pd.DataFrame) -> Figure | None:
    """Where the efficiency went: one panel per scaling series with a profiled point (at most
    MAX_PANELS); None when no series has one."""
    if "split_step_s" not in scaling.columns:
        return None
    data = scaling[scaling["split_step_s"].notna() & (scaling["mode"] != "single")]
    if data.empty:
        return None
    data = data.assign(
        idle_other_s=lambda d: d["idle_s"] - d["split_fsdp_s"].fillna(0) - d["split_barrier_s"].fillna(0),
        pred_comm_s=lambda d: d["pred_exposed_comm_s"] + d["pred_comm_interference_s"].fillna(0),
        pred_rest_s=lambda d: d["pred_step_time_s"] - d["pred_compute_s"] - d["pred_comm_s"],
    )
    groups = list(data.groupby("series", sort=True))[:MAX_PANELS]
    fig, axes = panels([str(series) for series, _ in groups])
    for ax, (_, panel) in zip(axes, groups, strict=False):
        panel = panel.sort_values("nodes")
        x = np.arange(len(panel))
        _split_bars(ax, x - 0.2, 0.38, panel, MEASURED_PARTS, hatch=None)
        predicted = panel["pred_compute_s"].notna()
        if predicted.any():
            _split_bars(ax, (x + 0.2)[predicted.to_numpy()], 0.3, panel[predicted], PREDICTED_PARTS, hatch="//")
        else:
            ax.text(0.02, 0.95, NO_PREDICTION, transform=ax.transAxes, va="top", fontsize=8)
        base = panel.iloc[0]
        shrink = base["nodes"] / panel["nodes"] if base["mode"] == "strong" else 1.0
        ideal = base["split_step_s"] * shrink * 1e3
        ax.plot(x, np.broadcast_to(ideal, len(x)), color="black", gid="ideal:step", **IDEAL_STYLE)
        ax.set_xticks(x, [f"{int(n)} node{'s' if n > 1 else ''}" for n in panel["nodes"]])
        ax.set_ylabel("profiled step (ms)")
        ax.set_title(f"{base['model']} {config_label(base.to_dict())} ({base['mode']})", y=1.0, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        legend_outside(ax, ["ideal step"])
    return fig


def _split_bars(ax, x, width: float, panel: pd.DataFrame, parts: list[tuple[str, str, int]], hatch: str | None) -> None:
    """One stacked bar per row of `panel` (ms); parts that are zero everywhere are left out."""
    bottom = 0.0
    for column, label, color in parts:
        values = panel[column].fillna(0).clip(lower=0).to_numpy() * 1e3
        if not values.any():
            continue
        shown = f"predicted: {label}" if hatch else label
        ax.bar(x, values, width, bottom=bottom, color=PALETTE[color], hatch=hatch, fill=hatch is None,
               edgecolor=PALETTE[color], label=shown, gid=f"split:{shown}")  # fmt: skip
        bottom = bottom + values


def _checkpoint_figure(points: pd.DataFrame) -> Figure | None:
    from reports.report.checkpoint import checkpoint_figure  # it builds on this module's styles

    return checkpoint_figure(points)


def all_figures(points: pd.DataFrame, scaling: pd.DataFrame) -> dict[str, tuple[str, Figure]]:
    """name -> (caption, Figure) for every plot that has data, in report order."""
    figures = {}
    for name, (caption, build) in FIGURES.items():
        fig = build(points, scaling)
        if fig is not None:
            figures[name] = (caption, fig)
    return figures
