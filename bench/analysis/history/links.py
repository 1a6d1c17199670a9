"""The cluster's measured links over time: one row per stored preflight, oldest first.

A preflight (bench/analysis/preflight.py) measures a world shape's matmul rate and collectives before the
points; the store keeps each one (bench/analysis/store/). Listed beside the change points, a step in a
series can be held against what the links measured then: a node network that measured 400 Gbit/s
one night and 180 the next explains a slowdown no software change does. The figures are the
record's own (`measured_links`: Gbit/s as the cluster fields mean them; the matmul median over
ranks), never recomputed here.
"""

from __future__ import annotations

from datetime import datetime

from bench.analysis.history.series import run_time
from bench.schema.preflight import PreflightResult

LINK_HEADERS = (
    "started", "sweep", "cluster", "shape", "status", "matmul TFLOP/s", "intra-node Gbit/s", "inter-node Gbit/s",
    "stragglers",
)  # fmt: skip


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def link_rows(preflights: list[PreflightResult], since: datetime | None = None) -> list[list[str]]:
    """Rows of LINK_HEADERS for the preflights started at or after `since`, oldest first."""
    timed = [(run_time(p), p) for p in preflights]
    kept = [(t, p) for t, p in timed if since is None or (t is not None and t >= since)]
    chosen = [p for _, p in sorted(kept, key=lambda item: item[1].started_at or "")]
    rows = []
    for record in chosen:
        links, spec = record.measured_links, record.spec
        matmul = record.matmul_tflops_median
        stragglers = ", ".join(f"{s.host} ({s.measure})" for s in record.stragglers) or "none"
        rows.append(
            [
                (record.started_at or "-")[:19],
                record.sweep,
                spec.cluster.name,
                f"{spec.nodes}x{spec.gpus_per_node}",
                record.status,
                _number(matmul),
                _number(links.get("intra_node_gbps")),
                _number(links.get("inter_node_gbps")),
                stragglers,
            ]
        )
    return rows
