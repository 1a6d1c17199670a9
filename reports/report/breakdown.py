"""Where the step went: the profiled steps' measured split (metrics.step_breakdown, profile.enabled)
beside the planner's predicted one, as a line per point (the report's table and summary.md) and a
figure per scaling series, "where the efficiency went".

The figure (reports/report/plots.py `where_efficiency_went_figure`, drawn in the report's pool like
every other, reports/report/render.py) reads the bars' parts from here. Each panel is one series: per node count a stacked bar of the measured step (compute; exposed
communication by collective; idle: FSDP's bookkeeping, the barrier's wait for the slowest rank, the
rest) and, hatched beside it, the planner's (compute; exposed communication plus the overlapped
communication it charges back as interference, which on CPU is all of it; the rest), and the ideal
step dashed: the baseline's step for weak scaling, shrunk by the node ratio for strong. What sits
above the dashed line is the efficiency lost, by part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.analysis.report.columns import breakdown_values
from reports.report import formatting as fmt
from reports.report.labels import config_label
from reports.report.table import Table

if TYPE_CHECKING:
    import pandas as pd

KINDS = ("all_gather", "reduce_scatter", "all_reduce")
NO_PREDICTION = "no prediction: sweep with sweep.plan=true"
HEADERS = ["sweep", "point", "model", "configuration", "nodes", "measured (share of the profiled step)", "predicted"]
# (column, label, palette index) of a bar's parts, bottom to top; "idle other" is idle less its named
# parts. The predicted bar's parts share the colour of the measured part they compare with.
MEASURED_PARTS = [("compute_s", "compute", 0), *((f"split_exposed_{k}_s", f"exposed {k}", 1 + i) for i, k in enumerate(KINDS)),
             ("split_fsdp_s", "idle: FSDP", 4), ("split_barrier_s", "idle: barrier", 5), ("idle_other_s", "idle: other", 6)]  # fmt: skip
PREDICTED_PARTS = [("pred_compute_s", "compute", 0), ("pred_comm_s", "exposed comm + interference", 1),
              ("pred_rest_s", "other", 6)]  # fmt: skip


def _share(value, step) -> float | None:
    if fmt.is_missing(value) or fmt.is_missing(step) or not step:
        return None
    return float(value) / float(step)


def _pct(share: float | None) -> str:
    return fmt.MISSING if share is None else f"{100 * share:.0f} %"


def measured_line(row: dict) -> str:
    """`compute 20 %, exposed comm 31 % (all_gather 15 %, reduce_scatter 16 %), idle 49 % (FSDP 28 %,
    barrier 1 %)`: the profiled step's parts as shares of it."""
    step = row.get("split_step_s")
    kinds = [f"{k} {_pct(_share(row.get(f'split_exposed_{k}_s'), step))}" for k in KINDS
             if _share(row.get(f"split_exposed_{k}_s"), step)]  # fmt: skip
    idle = [f"{name} {_pct(_share(row.get(col), step))}" for name, col in (("FSDP", "split_fsdp_s"),
            ("barrier", "split_barrier_s")) if _share(row.get(col), step) is not None]  # fmt: skip
    parts = [
        f"compute {_pct(_share(row.get('compute_s'), step))}",
        f"exposed comm {_pct(_share(row.get('exposed_comm_s'), step))}" + (f" ({', '.join(kinds)})" if kinds else ""),
        f"idle {_pct(_share(row.get('idle_s'), step))}" + (f" ({', '.join(idle)})" if idle else ""),
    ]
    return ", ".join(parts)


def predicted_line(row: dict) -> str:
    """The planner's split as shares of its step (on CPU its exposed communication plus the overlapped
    communication it charges back as interference is what compares with the measured exposed share)."""
    step = row.get("pred_step_time_s")
    if fmt.is_missing(step) or fmt.is_missing(row.get("pred_compute_s")):
        return NO_PREDICTION
    comm = float(row.get("pred_exposed_comm_s") or 0) + float(row.get("pred_comm_interference_s") or 0)
    rest = float(step) - float(row["pred_compute_s"]) - comm
    return f"compute {_pct(_share(row['pred_compute_s'], step))}, exposed comm + interference " \
           f"{_pct(_share(comm, step))}, other {_pct(_share(rest, step))}"  # fmt: skip


def record_lines(records) -> list[str]:
    """The sweep's console lines after its table: each profiled point's split, as the report shows it."""
    lines = []
    for record in records:
        b = record.metrics.step_breakdown
        if b is not None and b.step_s:
            parts = {"compute_s": b.compute_s, "exposed_comm_s": b.exposed_comm_s, "idle_s": b.idle_s}
            lines.append(f"  {record.point_id}  {measured_line({**breakdown_values(record), **parts})}")
    return ["where the step went (profiled steps, shares of the step):", *lines] if lines else []


def profiled(points: pd.DataFrame) -> pd.DataFrame:
    return points[points["split_step_s"].notna()] if "split_step_s" in points.columns else points.iloc[0:0]


def breakdown_table(points: pd.DataFrame) -> Table:
    """One row per profiled point: its measured split beside the planner's."""
    table = Table(HEADERS)
    for row in profiled(points).to_dict("records"):
        table.add([str(row["sweep"]), str(row["point_id"]), str(row["model"]), config_label(row), str(row["nodes"]),
                   measured_line(row), predicted_line(row)])  # fmt: skip
    return table
