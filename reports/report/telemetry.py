"""Telemetry in the report: what the devices did during each point's timed steps.

A table of every point's utilization, power, energy per token and throttling (from the records'
`metrics.telemetry`), flags for points that throttled or left a device mostly idle, and
small-multiple timelines (utilization, power, memory, network; one row per point) drawn from the
raw series each point left next to its result.json (the record names the sidecar file; the
caller says where each point's folder is). Records read from a store carry no sidecar: their
rows stay in the table, without timelines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bench.schema.metrics import get
from bench.schema.units import GIB
from reports.report import formatting as fmt
from reports.report.labels import config_label
from reports.report.tables import Table

if TYPE_CHECKING:  # the tables need no matplotlib: it is imported only to draw timelines
    from matplotlib.figure import Figure

UTIL, POWER, ENERGY, THROTTLED, IDLE = (
    get(name) for name in ("utilization", "power_per_device", "energy_per_token", "throttle_fraction", "idle_devices")
)
# A point throttled when at least this share of its GPU samples had a throttling reason (the catalogue's flag).
THROTTLE_FLAG = THROTTLED.flag("throttled")
# At most this many points get a timeline row (flagged points first); the table lists every point.
MAX_TIMELINES = 8
# Lines per panel before ranks or hosts collapse into their mean and a min-max band.
MAX_LINES = 8
# Panel geometry in inches (fixed: no layout engine, like reports/report/plots.py).
_PANEL_W, _PANEL_H, _GAP_W, _LEFT, _ROW_TOP, _ROW_BOTTOM = 3.1, 1.45, 0.8, 0.75, 0.5, 0.45
MB = 1e6

Lines = list[tuple[str, np.ndarray, np.ndarray]]


def read_sidecar(path: Path) -> pd.DataFrame | None:
    """A point's sampled series (Parquet or CSV), or None when it is missing or unreadable."""
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError, ImportError):
        return None


def load_timelines(points: pd.DataFrame, point_dirs: Mapping[tuple[str, str], Path] | None) -> dict[int, pd.DataFrame]:
    """Frame index -> the point's series, for ok points whose folder and sidecar are known."""
    if not point_dirs or "telemetry_sidecar" not in points:
        return {}
    out = {}
    for index, row in points[points["telemetry_sidecar"].notna() & (points["status"] == "ok")].iterrows():
        folder = point_dirs.get((row["sweep"], row["point_id"]))
        if folder is not None and (series := read_sidecar(Path(folder) / row["telemetry_sidecar"])) is not None:
            out[index] = series
    return out


def flags(row: Mapping) -> list[str]:
    """Why a point's telemetry stands out: it throttled, or a device sat mostly idle."""
    out = []
    throttle, idle = row.get(THROTTLED.key), row.get(IDLE.key)
    if not fmt.is_missing(throttle) and throttle >= THROTTLE_FLAG:
        out.append(f"throttled in {fmt.percent(throttle, 0)} of samples")
    if not fmt.is_missing(idle) and idle > 0:
        out.append(f"{int(idle)} device(s) mostly idle")
    return out


def has_telemetry(points: pd.DataFrame) -> pd.Series:
    if UTIL.key not in points:
        return pd.Series(False, index=points.index)
    return (points["status"] == "ok") & (points[UTIL.key].notna() | points["telemetry_sidecar"].notna())


TABLE_COLUMNS = ["sweep", "point", "model", "configuration", "nodes", UTIL.label, f"{POWER.label} ({POWER.unit})",
                 f"{ENERGY.label} ({ENERGY.unit})", "energy source", THROTTLED.label, "flag"]  # fmt: skip


def telemetry_table(points: pd.DataFrame, only_flagged: bool = False) -> Table:
    """One row per point with telemetry (flagged rows shaded); `only_flagged` for summary.md."""
    table = Table(TABLE_COLUMNS)
    for _, row in points[has_telemetry(points)].iterrows():
        notes = flags(row)
        if only_flagged and not notes:
            continue
        cells = [str(row["sweep"]), str(row["point_id"]), str(row["model"]), config_label(row), str(row["nodes"]),
                 fmt.percent(row[UTIL.key] / 100), fmt.number(row[POWER.key], 1),
                 fmt.significant(row[ENERGY.key]), str(row["energy_source"] or fmt.MISSING),
                 fmt.percent(row[THROTTLED.key], 0), "; ".join(notes)]  # fmt: skip
        table.add(cells, "flag" if notes else "")
    return table


def energy_notes(points: pd.DataFrame) -> list[str]:
    """Why energy per token is missing, where records say so (CPU without readable RAPL, ...)."""
    if "energy_note" not in points:
        return []
    return sorted(set(points.loc[points[ENERGY.key].isna(), "energy_note"].dropna()))[:3]


# --- timelines ------------------------------------------------------------------------------


def _per_rank(series: pd.DataFrame, column: str, scale: float = 1.0) -> Lines:
    if column not in series or series[column].isna().all():
        return []
    return [
        (f"rank {rank}", group["t_s"].to_numpy(float), group[column].to_numpy(float) / scale)
        for rank, group in series.groupby("rank", sort=True)
        if group[column].notna().any()
    ]


def _host_rows(series: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each host's rows from its lowest rank (host signals are the same for every rank on it)."""
    owners = series.groupby("host")["rank"].min()
    return {host: series[series["rank"] == rank].sort_values("t_s") for host, rank in owners.items()}


def _rate(times: np.ndarray, counter: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-second rate of a cumulative counter, at the midpoints between readings."""
    keep = ~np.isnan(counter)
    times, counter = times[keep], counter[keep]
    if len(times) < 2:
        return np.array([]), np.array([])
    dt = np.diff(times)
    ok = dt > 0
    return ((times[:-1] + times[1:]) / 2)[ok], (np.diff(counter)[ok] / dt[ok])


def utilization_lines(series: pd.DataFrame) -> Lines:
    return _per_rank(series, "util_pct")  # the sidecar's signal (fsdp_core/telemetry_summary.py SIGNALS)


def power_lines(series: pd.DataFrame) -> Lines:
    """GPU board power per rank; on CPU hosts, the RAPL package power per host."""
    if lines := _per_rank(series, "gpu_power_w"):
        return lines
    if "cpu_energy_j" not in series:
        return []
    out = []
    for host, rows in _host_rows(series).items():
        t, watts = _rate(rows["t_s"].to_numpy(float), rows["cpu_energy_j"].to_numpy(float))
        if len(t):
            out.append((f"{host} CPU package", t, watts))
    return out


def memory_lines(series: pd.DataFrame) -> Lines:
    """GPU memory in use per rank (NVML), else each rank's resident set size (CPU)."""
    return _per_rank(series, "gpu_mem_used_bytes", GIB) or _per_rank(series, "proc_rss_bytes", GIB)


_NET_COLUMN = re.compile(r"^(net|ib)_.+_(tx|rx)_bytes$")


def network_lines(series: pd.DataFrame) -> Lines:
    """Bytes sent and received per host, summed over its interfaces (Ethernet, loopback, IB/EFA)."""
    out = []
    for host, rows in _host_rows(series).items():
        for direction, word in (("tx", "sent"), ("rx", "received")):
            columns = [c for c in rows.columns if (m := _NET_COLUMN.match(c)) and m.group(2) == direction]
            if not columns:
                continue
            total = rows[columns].sum(axis=1, min_count=1).to_numpy(float)
            t, rate = _rate(rows["t_s"].to_numpy(float), total)
            if len(t):
                out.append((f"{host} {word}", t, rate / MB))
    return out


PANELS: list[tuple[str, Callable[[pd.DataFrame], Lines]]] = [
    ("utilization (%)", utilization_lines),
    ("power (W)", power_lines),
    ("memory (GiB)", memory_lines),
    ("network (MB/s)", network_lines),
]


def timeline_rows(points: pd.DataFrame, timelines: Mapping[int, pd.DataFrame]) -> list[int]:
    """The points that get a timeline row: flagged ones first, then in the report's order."""
    shown = [i for i in points.index if i in timelines]
    return sorted(shown, key=lambda i: (not flags(points.loc[i]), shown.index(i)))[:MAX_TIMELINES]


def timeline_figure(points: pd.DataFrame, timelines: Mapping[int, pd.DataFrame]) -> Figure | None:
    """Small multiples: one row per point, one panel per signal, a line per rank (or per host)."""
    rows = timeline_rows(points, timelines)
    if not rows:
        return None
    from matplotlib.figure import Figure

    cell_h = _ROW_TOP + _PANEL_H + _ROW_BOTTOM
    width, height = _LEFT + len(PANELS) * (_PANEL_W + _GAP_W), len(rows) * cell_h
    fig = Figure(figsize=(width, height))
    for r, index in enumerate(rows):
        row = points.loc[index]
        top = r * cell_h
        title = f"{row['model']} · {config_label(row)} · {int(row['nodes'])} node(s) · point {row['point_id']}"
        if notes := flags(row):
            title += "  [" + "; ".join(notes) + "]"
        fig.text(_LEFT / width, 1 - (top + 0.22) / height, title, fontsize=9, weight="bold", gid=f"timeline:{index}")
        for c, (label, lines_of) in enumerate(PANELS):
            left = (_LEFT + c * (_PANEL_W + _GAP_W)) / width
            bottom = 1 - (top + _ROW_TOP + _PANEL_H) / height
            ax = fig.add_axes((left, bottom, _PANEL_W / width, _PANEL_H / height))
            _draw_panel(ax, lines_of(timelines[index]), label, last_row=r == len(rows) - 1)
    return fig


def _draw_panel(ax, lines: Lines, label: str, last_row: bool) -> None:
    from reports.style import PALETTE

    ax.set_title(label, fontsize=8, y=1.0)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if last_row:
        ax.set_xlabel("seconds into the timed window", fontsize=7)
    if not lines:
        ax.text(
            0.5,
            0.5,
            "not measured on this device or host",
            ha="center",
            va="center",
            fontsize=8,
            color="grey",
            transform=ax.transAxes,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return
    if len(lines) > MAX_LINES:
        _band(ax, lines)
        return
    for i, (name, t, y) in enumerate(lines):
        style = "--" if name.endswith(" received") else "-"  # on loopback, received retraces sent
        ax.plot(t, y, style, color=PALETTE[i % len(PALETTE)], linewidth=1.0, label=name, gid=f"line:{label}:{name}")
    ax.legend(fontsize=6, loc="upper right", frameon=False)


def _band(ax, lines: Lines) -> None:
    """Many ranks: their mean and min-max on a common time grid."""
    from reports.style import PALETTE

    start = min(t[0] for _, t, _ in lines if len(t))
    end = max(t[-1] for _, t, _ in lines if len(t))
    grid = np.linspace(start, end, 200)
    values = np.vstack([np.interp(grid, t, y) for _, t, y in lines if len(t)])
    ax.fill_between(grid, values.min(axis=0), values.max(axis=0), color=PALETTE[0], alpha=0.25, label="min-max")
    ax.plot(grid, values.mean(axis=0), color=PALETTE[0], linewidth=1.0, label=f"mean of {len(values)}")
    ax.legend(fontsize=6, loc="upper right", frameon=False)
