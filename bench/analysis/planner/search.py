"""Search, not only predict: rank every configuration of one setup by the planner and keep the best.

`fsdp-bench plan --best` and `sweep.autotune=K` take a setup (model, cluster, nodes, sequence, ...:
every override that is not a searched axis) and search the axes

    strategy x precision x train.micro_batch x train.grad_accum x train.activation_checkpointing x train.compile

Each axis takes every value the registry and the schema allow (strategies and precisions: the
config groups, which follow bench/schema/recipes.py; checkpointing modes: bench.schema.spec.CHECKPOINTING;
micro-batches 1 to 64 in powers of two; compile only where the planner models its speed-up, GPUs),
unless an override constrains it (`precision=bf16,bf16_pure`, `train.micro_batch=4`). grad_accum
keeps the setup's value, unless constrained, or unless `search.global_batch` fixes the sequences
per optimizer step: then it follows from the micro-batch and the world size. Every candidate is
composed and validated like a grid point (bench.config.compose.load_points); those that break a launch
rule (fp8 on a CPU, ...) are counted and dropped, the others predicted (with a preflight's measured
links when given), and those that fit are ranked by `search.objective`: the highest tokens/s or MFU
first, or the lowest cost (dollars per million tokens) or time to train `search.tokens` first; these
two also search `nodes` (`nodes=8,16,32`) and drop what misses `search.max_hours` or `search.max_usd`.

Each configuration that loses gets its main reason against the winner: it does not fit, or the
part of its step time per token that grows most (recomputation, communication left exposed,
slower compute, optimizer and interference overhead).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.analysis.planner.plan_object import plan_object, value_at
from bench.config.compose import Point, compose, grid_items, is_grid_override, load_points, sweep_values
from bench.config.problems import ConfigError, describe_validation_error
from bench.config.registry import group_options
from bench.schema.labels import configuration_label
from bench.schema.options import LOWER_IS_BETTER, OBJECTIVES, SearchOptions
from bench.schema.spec import CHECKPOINTING
from bench.schema.units import GIB

# Where an objective's value is in a plan object, where it is not the key of the same name.
OBJECTIVE_KEYS = {"cost": "cost.usd_per_mtoken", "time_to_train": "to_train.hours"}


def better(objective: str):
    """A sort key: the best value first (lowest for LOWER_IS_BETTER, highest for the others)."""
    sign = 1.0 if objective in LOWER_IS_BETTER else -1.0
    return lambda candidate: sign * candidate.value(objective)


AXES = (
    "strategy",
    "precision",
    "train.micro_batch",
    "train.grad_accum",
    "train.activation_checkpointing",
    "train.compile",
)
DEFAULT_MICRO_BATCHES = ("1", "2", "4", "8", "16", "32", "64")


@dataclass(frozen=True)
class Candidate:
    point: Point
    prediction: dict[str, Any]

    @property
    def fits(self) -> bool:
        return bool(self.prediction["fits"])

    def value(self, objective: str) -> float:
        return float(value_at(self.prediction, OBJECTIVE_KEYS.get(objective, objective)))


@dataclass
class SearchResult:
    """What a search found. `ranked`: the fitting candidates, best first; `not_fitting`: by objective."""

    objective: str
    setup: dict[str, Any]  # the base spec (JSON) the candidates vary
    axes: dict[str, list[str]]  # the values searched per axis
    ranked: list[Candidate] = field(default_factory=list)
    not_fitting: list[Candidate] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)  # launch-rule problem -> candidates it excluded

    @property
    def searched(self) -> int:
        return len(self.ranked) + len(self.not_fitting) + sum(self.excluded.values())

    def beaten_by_misfits(self) -> list[Candidate]:
        """Configurations predicted to beat the winner that do not fit, the nearest to fitting first."""
        key = better(self.objective)
        best = key(self.ranked[0])
        beaten = [c for c in self.not_fitting if key(c) < best]
        return sorted(beaten, key=lambda c: c.prediction["memory_bytes_per_device"]["total"])


def search_options(cfg: dict[str, Any], objective: str | None = None) -> SearchOptions:
    """The config's `search.*`, validated; `objective` (the `--objective` flag) wins over search.objective."""
    from pydantic import ValidationError

    raw = dict(cfg.get("search") or {})
    if objective is not None:
        if objective not in OBJECTIVES:
            raise ConfigError([f"--objective: unknown objective '{objective}'; allowed: {', '.join(OBJECTIVES)}"])
        raw["objective"] = objective
    try:
        return SearchOptions.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "search.")) from None


def setup_and_axes(
    overrides: Sequence[str], nodes_searched: bool = False
) -> tuple[list[str], dict[str, list[str]], dict[str, Any]]:
    """(the setup's overrides, the values of each searched axis, the setup's composed config).

    Overrides of a searched axis constrain it; any other key must have one value (a search ranks
    the configurations of one setup). Without `gpus_per_node`, a search uses whole nodes. With
    `nodes_searched` (a cost or time-to-train objective), `nodes=8,16` is an axis too (`nodes` in the
    returned axes; the setup composes the first).
    """
    setup, constrained = [], {}
    for key, item in grid_items(overrides).items():
        if key in AXES or (nodes_searched and key == "nodes"):
            constrained[key] = sweep_values(item)
        elif is_grid_override(item):
            raise ConfigError(
                [
                    f"{key}: a search ranks one setup, and {item} gives several; choose one value "
                    f"(the searched axes take several: {', '.join(AXES)}"
                    + ("; nodes too with search.objective cost or time_to_train)" if key == "nodes" else ")")
                ]  # fmt: skip
            )
        else:
            setup.append(item)
    nodes = constrained.pop("nodes", None)
    if nodes:
        setup.append(f"nodes={nodes[0]}")
    cfg = compose(setup)
    if not any(o.partition("=")[0] == "gpus_per_node" for o in overrides):
        setup.append(f"gpus_per_node={cfg['cluster']['gpus_per_node']}")
        cfg = compose(setup)
    cuda = cfg["cluster"].get("device_type") == "cuda"
    defaults = {
        "strategy": group_options("strategy"),
        "precision": group_options("precision"),
        "train.micro_batch": list(DEFAULT_MICRO_BATCHES),
        "train.grad_accum": [str(cfg["train"]["grad_accum"])],
        "train.activation_checkpointing": list(CHECKPOINTING),
        # The planner models compile's speed-up on GPUs only: on a CPU both values would tie.
        "train.compile": ["false", "true"] if cuda else ["false"],
    }
    axes = {axis: constrained.get(axis, defaults[axis]) for axis in AXES}
    if nodes_searched:
        axes["nodes"] = nodes or [str(cfg["nodes"])]
    return setup, axes, cfg


def candidate_overrides(
    setup: list[str], axes: dict[str, list[str]], world_size: int, global_batch: int | None, ga_constrained: bool
) -> list[list[str]]:
    """Every candidate's override list; with a global batch, grad_accum = global / (world x micro-batch)."""
    grid = []
    fixed_axes = [a for a in AXES if a not in ("train.micro_batch", "train.grad_accum")]
    for values in itertools.product(*(axes[a] for a in fixed_axes)):
        for micro_batch in axes["train.micro_batch"]:
            if global_batch is None:
                accums = axes["train.grad_accum"]
            else:
                per_step = world_size * _integer("train.micro_batch", micro_batch)
                accum = global_batch // per_step
                if accum < 1 or accum * per_step != global_batch:
                    continue
                if ga_constrained and str(accum) not in axes["train.grad_accum"]:
                    continue
                accums = [str(accum)]
            for accum in accums:
                chosen = dict(zip(fixed_axes, values)) | {"train.micro_batch": micro_batch, "train.grad_accum": accum}
                grid.append([*setup, *(f"{axis}={chosen[axis]}" for axis in AXES)])
    return grid


def _integer(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError([f"{key}: got '{value}'; allowed: positive integers"]) from None


def search(overrides: Sequence[str], objective: str | None = None, preflight=None) -> SearchResult:
    """Rank every configuration of the setup the overrides describe (see the module docstring).

    Raises ConfigError (one line each) for an unknown objective, a grid outside the searched axes,
    an empty search space, an objective the cluster cannot give (MFU without a datasheet peak) and
    a space where nothing fits.
    """
    from bench.analysis.planner.predict import predict

    nodes_searched = (objective or _objective_override(overrides)) in LOWER_IS_BETTER
    setup, axes, cfg = setup_and_axes(overrides, nodes_searched)
    options = search_options(cfg, objective)
    world = int(cfg["nodes"]) * int(cfg["gpus_per_node"])
    ga_constrained = any(o.partition("=")[0] == "train.grad_accum" for o in overrides)
    grid = []
    for nodes in axes.get("nodes", [str(cfg["nodes"])]):
        base = [o for o in setup if o.partition("=")[0] != "nodes"] + [f"nodes={nodes}"] if nodes_searched else setup
        ranks = _integer("nodes", nodes) * int(cfg["gpus_per_node"])
        grid += candidate_overrides(base, axes, ranks, options.global_batch, ga_constrained)
    if not grid:
        raise ConfigError(
            [
                f"search.global_batch: {options.global_batch} sequences per step is no micro-batch "
                f"({', '.join(axes['train.micro_batch'])}) x grad_accum x {world} ranks; allowed: a multiple of "
                f"{world * min(_integer('train.micro_batch', m) for m in axes['train.micro_batch'])}"
            ]  # fmt: skip
        )
    points, invalid = load_points(grid)
    excluded = Counter(_problem(lines[0]) for _, lines in invalid)
    if not points:
        (problem, _), *_ = excluded.most_common(1)
        raise ConfigError([f"empty search space: all {len(grid)} configurations break a launch rule ({problem})"])
    if preflight is not None:
        _check_preflight(points[0], preflight)
    candidates = [Candidate(point, predict(point.spec, preflight)) for point in points]
    _train_targets(candidates, options, points[0].spec.cluster.name)
    if options.objective in LOWER_IS_BETTER:
        pass  # checked with the targets above
    elif candidates[0].prediction.get(options.objective) is None:
        allowed = ", ".join(o for o in OBJECTIVES if o != options.objective)
        raise ConfigError(
            [
                f"search.objective: {options.objective} needs the device's datasheet peak, which "
                f"{points[0].spec.cluster.name} does not have; allowed here: {allowed}"
            ]  # fmt: skip
        )
    by_value = sorted(candidates, key=better(options.objective))  # stable: enumeration order on ties
    result = SearchResult(
        objective=options.objective,
        setup=points[0].spec.model_dump(mode="json"),
        axes=axes,
        ranked=[c for c in by_value if c.fits],
        not_fitting=[c for c in by_value if not c.fits],
        excluded=dict(excluded),
    )
    if result.ranked and (options.max_hours or options.max_usd):
        meeting = [c for c in result.ranked if _within(c, options)]
        if not meeting:
            raise ConfigError([_nothing_meets(result.ranked, options)])
        result.ranked = meeting
    if not result.ranked:
        lean = min(result.not_fitting, key=lambda c: c.prediction["memory_bytes_per_device"]["total"])
        raise ConfigError([f"search: none of the {len(candidates)} valid configurations fits ({does_not_fit(lean)})"])
    return result


def _objective_override(overrides: Sequence[str]) -> str | None:
    """`search.objective=...` among the overrides (what decides, before composing, whether nodes are searched)."""
    values = [o.partition("=")[2] for o in overrides if o.partition("=")[0] == "search.objective"]
    return values[-1] if values else None


def _train_targets(candidates: list[Candidate], options: SearchOptions, cluster: str) -> None:
    """With search.tokens, each candidate's time and cost to train them (`to_train`); one line for an
    objective or a constraint the search cannot evaluate."""
    from bench.analysis.planner.failures import to_train

    priced = candidates[0].prediction.get("cost") is not None
    if (options.objective == "cost" or options.max_usd) and not priced:
        key = "search.objective: cost" if options.objective == "cost" else "search.max_usd"
        raise ConfigError([f"{key} needs a price: cluster.usd_per_node_hour is not set for {cluster}; set it"])
    if options.tokens is None:
        for key, needs in (("time_to_train", options.objective == "time_to_train"), ("max_hours", options.max_hours),
                           ("max_usd", options.max_usd)):  # fmt: skip
            if needs:
                what = "search.objective: time_to_train" if key == "time_to_train" else f"search.{key}"
                raise ConfigError([f"{what} needs search.tokens (the tokens to train, e.g. search.tokens=2T)"])
        return
    for candidate in candidates:
        candidate.prediction["to_train"] = to_train(options.tokens, candidate.prediction)


def _within(candidate: Candidate, options: SearchOptions) -> bool:
    train = candidate.prediction["to_train"]
    return (options.max_hours is None or train["hours"] <= options.max_hours) and (
        options.max_usd is None or train["usd"] <= options.max_usd
    )


def _nothing_meets(ranked: list[Candidate], options: SearchOptions) -> str:
    fastest = min(c.prediction["to_train"]["hours"] for c in ranked)
    limits = [f"search.max_hours={options.max_hours:g}" if options.max_hours else None,
              f"search.max_usd={options.max_usd:g}" if options.max_usd else None]  # fmt: skip
    cheapest = min((c.prediction["to_train"]["usd"] for c in ranked if c.prediction["to_train"]["usd"]), default=None)
    best = f"the fastest takes {fastest:,.1f} h" + (f", the cheapest costs {cheapest:,.0f} USD" if cheapest else "")
    return (
        f"search: none of the {len(ranked)} fitting configurations meets {' and '.join(filter(None, limits))} ({best})"
    )


def _problem(line: str) -> str:
    """A launch-rule problem without the point's label."""
    return line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line


def _check_preflight(point: Point, preflight) -> None:
    from bench.analysis.planner.from_preflight import compatibility_problem

    problem = compatibility_problem(point.spec, preflight)
    if problem:
        raise ConfigError([problem])


# --- why a configuration loses ------------------------------------------------------------------


def does_not_fit(candidate: Candidate) -> str:
    p = candidate.prediction
    need, have = p["memory_bytes_per_device"]["total"] / GIB, p["device_memory_bytes"] / GIB
    return f"does not fit: {candidate_label(candidate)} needs {need:.1f} GiB per device, {have:.1f} GiB available"


def seconds_per_token(candidate: Candidate) -> dict[str, float]:
    """One device's step time per token it trains, split by cause: recomputation (the share of
    compute the hardware spends on checkpointed blocks' forward again), the rest of compute,
    exposed communication, and the rest (optimizer, overlap interference, offload)."""
    p, spec = candidate.prediction, candidate.point.spec
    tokens = p["tokens_per_step"] / spec.world_size
    split = p["step_time_split_s"]
    recompute_share = 1 - spec.flops_per_token / spec.hardware_flops_per_token
    return {
        "recompute": split["compute"] * recompute_share / tokens,
        "compute": split["compute"] * (1 - recompute_share) / tokens,
        "exposed_comm": split["exposed_comm"] / tokens,
        "other": split["other"] / tokens,
    }


def loss_reason(candidate: Candidate, winner: Candidate) -> str:
    """The main reason `candidate` ranks below `winner`: the cause that adds the most time per token."""
    if not candidate.fits:
        return does_not_fit(candidate)
    mine, best = seconds_per_token(candidate), seconds_per_token(winner)
    cause = max(mine, key=lambda k: mine[k] - best[k])
    step = sum(mine.values())
    spec = candidate.point.spec.train
    if mine[cause] - best[cause] <= 0:
        return "ties with #1"
    if cause == "recompute":
        return f"recompute cost: activation_checkpointing={spec.activation_checkpointing} recomputes {mine[cause] / step:.0%} of its step"
    if cause == "exposed_comm":
        return f"communication-bound: {mine[cause] / step:.0%} of its step is exposed communication (#1: {best[cause] / sum(best.values()):.0%})"
    if cause == "compute":
        precision = candidate.point.spec.precision
        return f"slower compute: {precision}{'' if spec.compile else ', not compiled'} ({mine[cause] / best[cause]:.2f}x #1's compute per token)"
    return f"overhead: optimizer and overlap interference take {mine[cause] / step:.0%} of its step"


def candidate_label(candidate: Candidate) -> str:
    """The searched axes of a candidate: `full_shard bf16 mb=2 ga=1 ac=full compile`."""
    return configuration_label(candidate.point.spec)


def as_json(result: SearchResult, top: int) -> dict[str, Any]:
    """The search as plain data: each configuration is its plan object (the shape `plan --json`
    prints, bench/analysis/planner/plan_object.py) with its rank (and, for the ones after the top K,
    the reason it loses to #1)."""
    winner = result.ranked[0]
    shown = result.ranked[:top]
    following = result.ranked[top : 2 * top]

    def plan(c: Candidate, **extra: Any) -> dict[str, Any]:
        return plan_object(c.point.spec.point_id, c.prediction, **extra)

    return {
        "objective": result.objective,
        "setup": result.setup,
        "axes": result.axes,
        "searched": result.searched,
        "fitting": len(result.ranked),
        "not_fitting": len(result.not_fitting),
        "excluded": result.excluded,
        "top": [plan(c, rank=i + 1) for i, c in enumerate(shown)],
        "next": [plan(c, rank=top + i + 1, reason=loss_reason(c, winner)) for i, c in enumerate(following)],
        "beaten_by_not_fitting": [plan(c, reason=does_not_fit(c)) for c in result.beaten_by_misfits()[:top]],
    }
