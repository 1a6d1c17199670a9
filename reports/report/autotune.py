"""The autotune section: the planner's ranking of the configurations `sweep.autotune=K` ran, next to
the ranking their measurements give, with Spearman's rank correlation and the measured winner.

A record of an autotuned sweep carries, in its prediction, `autotune.rank` (the planner's rank of
its configuration in the search), `autotune.value` (the predicted objective) and
`autotune.objective` (tokens_per_s, tokens_per_s_per_device or mfu: the measured column compared).
Measured values are the report's cells (repeats pooled by bench.analysis.stats), so they are the numbers
the rest of the report shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from bench.analysis.report.digest import autotune_objective
from bench.analysis.stats import rank_correlation
from bench.schema.record import RunResult
from reports.report import formatting as fmt
from reports.report.labels import config_label
from reports.report.tables import Table


@dataclass(frozen=True)
class AutotuneSection:
    table: Table
    objective: str
    configurations: int
    spearman: float
    winner: str  # the measured best configuration
    winner_predicted_rank: int
    predicted_winner_measured_rank: int


def objective_of(records: Sequence[RunResult]) -> str | None:
    """The objective the sweep's search ranked by (None: no record was autotuned)."""
    return next(filter(None, map(autotune_objective, records)), None)


def autotune_section(cells: pd.DataFrame, records: Sequence[RunResult]) -> AutotuneSection | None:
    """Predicted vs measured ranking of the autotuned configurations that measured a value."""
    objective = objective_of(records)
    if objective is None or "pred_autotune_rank" not in cells:
        return None
    ran = cells[cells["pred_autotune_rank"].notna() & cells[objective].notna()]
    if ran.empty:
        return None
    ran = ran.assign(measured_rank=ran[objective].rank(ascending=False, method="min").astype(int))
    ran = ran.sort_values("pred_autotune_rank", kind="stable")
    show = fmt.percent if objective == "mfu" else fmt.number
    table = Table(["predicted rank", "configuration", f"predicted {objective}", f"measured {objective}",
                   "measured / predicted", "measured rank"])  # fmt: skip
    winner = ran.loc[ran[objective].idxmax()]
    for _, row in ran.iterrows():
        table.add(
            [str(int(row["pred_autotune_rank"])), config_label(row), show(row["pred_autotune_value"]),
             show(row[objective]), f"{row[objective] / row['pred_autotune_value']:.2f}", str(int(row["measured_rank"]))],
            "flag" if row.name == winner.name else "",
        )  # fmt: skip
    return AutotuneSection(
        table=table,
        objective=objective,
        configurations=len(ran),
        spearman=rank_correlation(ran["pred_autotune_value"], ran[objective]),
        winner=config_label(winner),
        winner_predicted_rank=int(winner["pred_autotune_rank"]),
        predicted_winner_measured_rank=int(ran.iloc[0]["measured_rank"]),
    )
