"""The report's "Cluster health" section: what the preflights measured against what the cluster
preset promises, which ranks were slow, and which points were measured on a busy host.

Inputs are the preflight records of the results folder (bench.analysis.preflight.load_preflights) and the
point records; the straggler rule and its thresholds are bench.analysis.stats.stragglers with the
preflight settings' defaults, the same rule the preflight itself applies.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.analysis.preflight import nominal_busbw_gbps
from bench.analysis.report.digest import step_time_stragglers
from bench.analysis.slow_hosts import HOST_HEADERS, slow_hosts
from bench.schema.env import HostLoad
from bench.schema.preflight import PreflightResult
from bench.schema.record import RunResult
from reports.report.html import RenderedFigure, render_figure
from reports.report.tables import Table

if TYPE_CHECKING:  # the tables need no matplotlib: the figures import it when a preflight has some to draw
    from matplotlib.figure import Figure

OPS = ("all_gather", "reduce_scatter", "all_reduce")
# What the dashed lines are, on the figure's axis: the same share of `inter_node_gbps` (the whole
# node's network) the planner uses and the links table's measured value inverts.
NOMINAL_LABEL = "bus bandwidth (GB/s); dashed: preset\nacross nodes: the ring's share of the node's network"


@dataclass
class ClusterHealth:
    figures: list[RenderedFigure] = field(default_factory=list)
    links: Table = field(default_factory=lambda: Table(LINK_HEADERS))
    stragglers: Table = field(default_factory=lambda: Table(STRAGGLER_HEADERS))
    loaded: Table = field(default_factory=lambda: Table(LOADED_HEADERS))
    slow_hosts: Table = field(default_factory=lambda: Table(list(HOST_HEADERS)))

    @property
    def empty(self) -> bool:
        tables = (self.links, self.stragglers, self.loaded, self.slow_hosts)
        return not (self.figures or any(t.rows for t in tables))


def cluster_health(preflights: Sequence[PreflightResult], records: Sequence[RunResult]) -> ClusterHealth:
    health = ClusterHealth()
    ok = [p for p in preflights if p.status == "ok"]
    for preflight in ok:
        shape = _shape(preflight)
        if preflight.collectives:
            health.figures.append(
                render_figure(
                    f"preflight_busbw_{preflight.sweep}_{shape}",
                    f"Bus bandwidth vs message size, {preflight.sweep} {shape} ({preflight.spec.cluster.name}); "
                    "dashed: the preset's link as the planner models it (one GPU's NVLink within a node; across nodes "
                    "the ring's share of the node's network, cluster.inter_node_gbps)",
                    busbw_figure(preflight),
                )
            )
        if preflight.ranks:
            health.figures.append(
                render_figure(
                    f"preflight_matmul_{preflight.sweep}_{shape}",
                    f"Matmul TFLOP/s per rank at the model's GEMM shapes, {preflight.sweep} {shape}; "
                    "red: a straggler, line: the median",
                    matmul_figure(preflight),
                )
            )
        _link_rows(health.links, preflight)
        _preflight_straggler_rows(health.stragglers, preflight)
        _loaded_rows(health.loaded, f"preflight {preflight.sweep} {shape}", preflight.host_load)
    for record in records:
        _step_time_straggler_rows(health.stragglers, record)
        _loaded_rows(health.loaded, f"{record.sweep}/{record.point_id}", record.metrics.host_load)
    for host in slow_hosts(records, preflights):  # hosts that keep being slow across the points
        health.slow_hosts.add(host.row(), "flag")
    return health


def _shape(preflight: PreflightResult) -> str:
    return f"{preflight.spec.nodes}x{preflight.spec.gpus_per_node}"


def busbw_figure(preflight: PreflightResult) -> Figure:
    """One panel per collective: bus bandwidth (GB/s) vs message size per group, log-log, with each
    group's nominal link (bench.analysis.preflight.nominal_busbw_gbps) as a dashed line in its colour."""
    from matplotlib.figure import Figure

    from reports.style import MARKERS, PALETTE

    ops = [op for op in OPS if any(s.op == op for s in preflight.collectives)]
    fig = Figure(figsize=(4.2 * len(ops) + 1.6, 3.4))
    axes = fig.subplots(1, len(ops), squeeze=False)[0]
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.86, wspace=0.28)
    groups = sorted({(s.group, s.node) for s in preflight.collectives}, key=_group_order)
    for ax, op in zip(axes, ops):
        for index, (group, node) in enumerate(groups):
            samples = sorted(
                (s for s in preflight.collectives if s.op == op and s.group == group and s.node == node),
                key=lambda s: s.bytes,
            )
            if not samples:
                continue
            colour = PALETTE[index % len(PALETTE)]
            label = f"{group} ({samples[0].group_size} ranks)" if node is None else f"node {node} ({group})"
            ax.plot([s.bytes for s in samples], [s.busbw_gbps for s in samples], marker=MARKERS[index % len(MARKERS)],
                    color=colour, label=label, gid=f"busbw:{op}:{group}:{node}")  # fmt: skip
            if node is None or node == 0:
                nominal = nominal_busbw_gbps(preflight.spec, group)
                ax.axhline(nominal, color=colour, linestyle="--", linewidth=1.0, alpha=0.7, gid=f"nominal:{op}:{group}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op, fontsize=10)
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel(NOMINAL_LABEL, fontsize=8)
    axes[-1].legend(fontsize=7, loc="lower right")
    return fig


def _group_order(key: tuple[str, int | None]) -> tuple[int, int]:
    order = ("world", "shard", "replicate", "node")
    return order.index(key[0]) if key[0] in order else len(order), -1 if key[1] is None else key[1]


def matmul_figure(preflight: PreflightResult) -> Figure:
    """A bar per rank (its matmul TFLOP/s), stragglers in red, the median as a line."""
    from matplotlib.figure import Figure

    ranks = preflight.ranks
    slow = {s.rank for s in preflight.stragglers if s.measure == "matmul"}
    fig = Figure(figsize=(min(14.0, max(5.0, 2.0 + 0.35 * len(ranks))), 3.0))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.18, top=0.92)
    colours = ["#D55E00" if r.rank in slow else "#0072B2" for r in ranks]
    ax.bar([r.rank for r in ranks], [r.matmul_tflops for r in ranks], color=colours, gid="matmul")
    median = statistics.median(r.matmul_tflops for r in ranks)
    ax.axhline(median, color="black", linewidth=1.0, gid="median")
    ax.set_xlabel("rank")
    ax.set_ylabel("matmul TFLOP/s")
    ax.set_xticks([r.rank for r in ranks] if len(ranks) <= 32 else ax.get_xticks())
    return fig


LINK_HEADERS = ["sweep", "shape", "cluster", "measure", "measured", "nominal", "measured / nominal"]


def _link_rows(table: Table, preflight: PreflightResult) -> None:
    """Matmul TFLOP/s vs the device's peak, and each link's bandwidth vs the preset's, side by side."""
    spec, shape = preflight.spec, _shape(preflight)
    head = [preflight.sweep, shape, spec.cluster.name]
    if preflight.ranks:
        median = statistics.median(r.matmul_tflops for r in preflight.ranks)
        peak = spec.matmul_peak_tflops
        table.add([*head, f"matmul TFLOP/s ({spec.precision}, median rank)", f"{median:,.3g}", _opt(peak),
                   _ratio(median, peak)])  # fmt: skip
    links = preflight.measured_links
    for key, nominal, label in (
        ("intra_node_gbps", spec.cluster.intra_node_gbps, "intra-node link, Gbit/s per GPU"),
        ("inter_node_gbps", spec.cluster.inter_node_gbps, "inter-node network, Gbit/s per node"),
    ):
        if key in links:
            flag = "flag" if links[key] < 0.5 * nominal else ""
            table.add([*head, label, f"{links[key]:,.4g}", f"{nominal:,.4g}", _ratio(links[key], nominal)], flag)
    if "all_reduce_latency_s" in links:
        table.add([*head, "all-reduce latency per ring hop, µs", f"{links['all_reduce_latency_s'] * 1e6:,.3g}",
                   f"{spec.cluster.link_latency_s * 1e6:,.3g}", _ratio(links["all_reduce_latency_s"],
                                                                   spec.cluster.link_latency_s)])  # fmt: skip


def _opt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4g}"


def _ratio(measured: float, nominal: float | None) -> str:
    return "-" if not nominal else f"{measured / nominal:.2f}"


STRAGGLER_HEADERS = ["source", "measure", "rank", "host", "local rank", "value (s)", "median (s)", "slower by"]


def _preflight_straggler_rows(table: Table, preflight: PreflightResult) -> None:
    source = f"preflight {preflight.sweep} {_shape(preflight)}"
    for s in preflight.stragglers:
        rank = "-" if s.rank is None else str(s.rank)
        local = "-" if s.local_rank is None else str(s.local_rank)
        who = s.host if s.node is None else f"{s.host} (node {s.node})"
        table.add([source, s.measure, rank, who, local, f"{s.value_s:.4g}", f"{s.median_s:.4g}",
                   f"{100 * s.slower_by:.0f} %"], "flag")  # fmt: skip


def _step_time_straggler_rows(table: Table, record: RunResult) -> None:
    """Ranks whose median step time is beyond the straggler rule among the point's ranks."""
    slow = step_time_stragglers(record)
    if not slow:
        return
    medians = record.metrics.rank_step_time_medians_s
    median = statistics.median(medians)
    per_node = record.spec.gpus_per_node
    hosts = record.env.rank_hosts
    for rank, excess in sorted(slow.items()):
        host = hosts[rank] if rank < len(hosts) else f"node {rank // per_node}"
        table.add([f"point {record.sweep}/{record.point_id}", "step time", str(rank), host, str(rank % per_node),
                   f"{medians[rank]:.4g}", f"{median:.4g}", f"{100 * excess:.0f} %"], "flag")  # fmt: skip


LOADED_HEADERS = ["measurement", "host", "cores", "cores its ranks used", "load before", "load after"]


def _loaded_rows(table: Table, what: str, loads: Sequence[HostLoad]) -> None:
    for host in loads:
        if host.loaded:
            table.add([what, host.host, str(host.cores), str(host.ranks_cores), f"{host.before:.2f}",
                       f"{host.after:.2f}"], "flag")  # fmt: skip
