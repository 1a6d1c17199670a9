"""The report's checkpoint view: save time and bandwidth against model size and node count, with the
planner's prediction beside the measurement where records carry one (sweep.plan=true).

Reads only the frame's `ckpt_*` and `pred_ckpt_*` columns (bench/analysis/report/frame.py); nothing to show
when no point checkpointed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from reports.report import formatting as fmt
from reports.report.labels import config_label
from reports.report.tables import Table

if TYPE_CHECKING:  # the table needs no matplotlib: the figure's helpers import it when they draw
    from matplotlib.figure import Figure

GB = 1e9  # storage bandwidth and checkpoint sizes are quoted in decimal units (GB, GB/s)


def checkpointed(points: pd.DataFrame) -> pd.DataFrame:
    if "ckpt_saves" not in points.columns:
        return points.iloc[0:0]
    return points[(points["status"] == "ok") & points["ckpt_saves"].fillna(0).gt(0)]


def checkpoint_figure(points: pd.DataFrame) -> Figure | None:
    """Left: seconds until a save is durable vs its size (one colour per node count; hollow: predicted).
    Right: aggregate write (solid) and read (dotted) bandwidth vs nodes, one colour per model; dashed:
    the storage bandwidth the planner assumed."""
    data = checkpointed(points)
    if data.empty:
        return None
    left, right = _two_panels()
    fig = left.figure
    _size_panel(left, data)
    _bandwidth_panel(right, data)
    return fig


# Two panels side by side, each with its legend on its right; inches (fixed geometry, as reports/report/plots.py).
_PANEL_W, _PANEL_H, _MARGIN_L, _LEGEND_W, _TOP, _BOTTOM = 4.6, 2.7, 0.95, 2.4, 0.4, 0.6


def _two_panels():
    from matplotlib.figure import Figure

    cell = _MARGIN_L + _PANEL_W + _LEGEND_W
    width, height = 2 * cell, _TOP + _PANEL_H + _BOTTOM
    fig = Figure(figsize=(width, height))
    box = (_PANEL_W / width, _PANEL_H / height)
    return [fig.add_axes(((i * cell + _MARGIN_L) / width, _BOTTOM / height, *box)) for i in range(2)]


def _size_panel(ax, data: pd.DataFrame) -> None:
    from reports.style import MARKERS, PALETTE, legend_outside

    for index, (nodes, group) in enumerate(data.groupby("nodes", sort=True)):
        style = {"color": PALETTE[index % len(PALETTE)], "marker": MARKERS[index % len(MARKERS)], "linestyle": ""}
        size = group["ckpt_state_bytes"].to_numpy(dtype=float) / GB
        ax.plot(size, group["ckpt_durable_s"], label=f"{int(nodes)} node{'s' * (nodes > 1)}", gid=f"durable:{nodes}",
                **style)  # fmt: skip
        predicted = group[group["pred_ckpt_write_s"].notna()] if "pred_ckpt_write_s" in group else group.iloc[0:0]
        if not predicted.empty:
            ax.plot(predicted["pred_ckpt_state_bytes"] / GB, predicted["pred_ckpt_write_s"], markerfacecolor="none",
                    label=f"{int(nodes)} predicted", gid=f"predicted:{nodes}", **style)  # fmt: skip
    ax.set_xlabel("model + optimizer state (GB)")
    ax.set_ylabel("save until durable (s)")
    _log_if_wide(ax)
    ax.set_title("Checkpoint save time vs size", y=1.0)
    ax.grid(True, alpha=0.3)
    legend_outside(ax, [])


def _plain():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:.3g}")


def _log_if_wide(ax) -> None:
    """Log axes where the values span more than a factor LOG_MIN_SPAN (model sizes do), plain numbers on both."""
    from matplotlib.ticker import MaxNLocator, NullFormatter

    from reports.style import LOG_MIN_SPAN

    for axis, (low, high), scale in ((ax.xaxis, ax.dataLim.intervalx, ax.set_xscale),
                                     (ax.yaxis, ax.dataLim.intervaly, ax.set_yscale)):  # fmt: skip
        if low > 0 and high / low > LOG_MIN_SPAN:
            scale("log")
            axis.set_label_text(axis.get_label_text() + ", log scale")
        else:
            axis.set_major_locator(MaxNLocator(4))
        axis.set_major_formatter(_plain())
        axis.set_minor_formatter(NullFormatter())


def _bandwidth_panel(ax, data: pd.DataFrame) -> None:
    from reports.style import MARKERS, PALETTE, legend_outside, log2_nodes

    for index, (model, group) in enumerate(data.groupby("model", sort=True)):
        group = group.groupby("nodes", as_index=False)[["ckpt_write_bytes_per_s", "ckpt_read_bytes_per_s"]].median()
        color = PALETTE[index % len(PALETTE)]
        ax.plot(group["nodes"], group["ckpt_write_bytes_per_s"] / GB, color=color, marker=MARKERS[index % 8],
                label=f"{model} write", gid=f"write:{model}")  # fmt: skip
        ax.plot(group["nodes"], group["ckpt_read_bytes_per_s"] / GB, color=color, marker=MARKERS[index % 8],
                linestyle=":", label=f"{model} read", gid=f"read:{model}")  # fmt: skip
    assumed = data["pred_ckpt_storage_gbps"].dropna() if "pred_ckpt_storage_gbps" in data else pd.Series(dtype=float)
    if not assumed.empty:
        ax.axhline(float(assumed.median()) / 8, color="grey", linestyle="--", label="planner's storage bandwidth")
    log2_nodes(ax, data["nodes"])
    ax.set_ylabel("aggregate GB/s")
    ax.yaxis.set_major_formatter(_plain())
    ax.set_title("Checkpoint bandwidth vs nodes", y=1.0)
    ax.grid(True, alpha=0.3)
    legend_outside(ax, [])


CHECKPOINT_HEADERS = ["sweep", "point", "model", "configuration", "nodes", "mode", "every", "saves", "state (GB)",
                      "blocked s/save", "durable s/save", "write GB/s", "load s", "read GB/s", "goodput",
                      "blocked"]  # fmt: skip
PREDICTED_HEADERS = ["predicted state (GB)", "predicted durable s", "predicted goodput"]


def checkpoint_table(points: pd.DataFrame) -> Table:
    """One row per checkpointed point: medians over its saves, the load after the run, goodput."""
    data = checkpointed(points)
    predicted = "pred_ckpt_write_s" in data.columns and bool(data["pred_ckpt_write_s"].notna().any())
    table = Table(CHECKPOINT_HEADERS + PREDICTED_HEADERS * predicted)
    for row in data.to_dict("records"):
        cells = [str(row["sweep"]), str(row["point_id"]), str(row["model"]), config_label(row), str(row["nodes"]),
                 str(row["ckpt_mode"]), str(int(row["ckpt_every"])), str(int(row["ckpt_saves"])),
                 _gb(row["ckpt_state_bytes"]), fmt.significant(row["ckpt_blocked_s"]),
                 fmt.significant(row["ckpt_durable_s"]), _gb(row["ckpt_write_bytes_per_s"]),
                 fmt.significant(row["ckpt_load_s"]), _gb(row["ckpt_read_bytes_per_s"]),
                 fmt.percent(row["ckpt_goodput"]), fmt.percent(row["ckpt_blocked_fraction"])]  # fmt: skip
        if predicted:
            cells += [_gb(row["pred_ckpt_state_bytes"]), fmt.significant(row["pred_ckpt_write_s"]),
                      fmt.percent(row["pred_ckpt_goodput"])]  # fmt: skip
        table.add(cells)
    return table


def _gb(value) -> str:
    return fmt.MISSING if fmt.is_missing(value) else f"{float(value) / GB:.3g}"
