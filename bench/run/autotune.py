"""`sweep.autotune=K`: a sweep that runs the K configurations the planner ranks best, not a grid.

The sweep's overrides describe one setup and constrain the searched axes, exactly as for
`fsdp-bench plan --best` (bench/analysis/planner/search.py). The K best configurations that fit become the
sweep's points; each record carries its plan object (bench/analysis/planner/plan_object.py) with
`autotune` = {rank, value, objective, searched, fitting}, so the report can set the planner's ranking beside the measured one
(reports/report/autotune.py). With `sweep.preflight=true` the sweep first measures the setup's world
shape (one preflight, every searched strategy's process groups) and ranks with the links it
measured (bench/analysis/planner/from_preflight.py); a failed preflight leaves the nominal ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.analysis.planner.plan_object import plan_object
from bench.analysis.planner.search import SearchResult, search
from bench.config.compose import Point, compose, is_grid_override, sweep_options


@dataclass(frozen=True)
class Autotuned:
    points: list[Point]
    predictions: dict[str, dict]  # point id -> the prediction its records carry
    result: SearchResult


def autotune_count(overrides: Sequence[str]) -> int:
    """K of `sweep.autotune=K` (0: the sweep runs its grid)."""
    return sweep_options(compose([o for o in overrides if not is_grid_override(o)])).autotune


def choose(overrides: Sequence[str], k: int, preflight=None) -> Autotuned:
    """The K best configurations of the search (fewer if fewer fit), with their predictions."""
    result = search(overrides, preflight=preflight)
    chosen = result.ranked[:k]
    predictions = {}
    for rank, candidate in enumerate(chosen, 1):
        autotune = {
            "rank": rank,
            "value": candidate.value(result.objective),
            "objective": result.objective,
            "searched": result.searched,
            "fitting": len(result.ranked),
        }
        point_id = candidate.point.spec.point_id
        predictions[point_id] = plan_object(point_id, candidate.prediction, autotune=autotune)
    return Autotuned([c.point for c in chosen], predictions, result)
