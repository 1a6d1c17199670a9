"""Compose the Hydra config tree in `sweeps/` into validated RunSpecs.

Hydra runs here, in the parent process only; ranks receive a resolved JSON spec. The grid
of a sweep is the cartesian product of comma-separated overrides (Hydra's BasicSweeper
rules), taken from the command line and from the experiment's `sweep.grid`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.schemas import RunSpec, describe_validation_error

CONFIG_DIR = Path(__file__).resolve().parent.parent / "sweeps"
GROUPS = ("model", "strategy", "precision", "cluster", "launcher", "experiment")


class ConfigError(ValueError):
    """Invalid input: the CLI prints each line and exits 2 before anything launches."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        super().__init__("; ".join(self.lines))


@dataclass(frozen=True)
class Point:
    """One composed point: its overrides (for the `reproduce` line), config and validated spec."""

    overrides: tuple[str, ...]
    config: dict[str, Any]
    spec: RunSpec


def group_options(group: str) -> list[str]:
    """The selectable options of a config group (files not starting with `_`)."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml") if not p.stem.startswith("_"))


def compose(overrides: Sequence[str]) -> dict[str, Any]:
    """Compose one point's config as a plain dict; unknown group options raise ConfigError."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    _check_group_options(overrides)
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=list(overrides))
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        # ValueError: Hydra's own complaint about malformed overrides such as `experiment=null`.
        raise ConfigError([_explain(exc, overrides)]) from None


def _explain(exc: Exception, overrides: Sequence[str]) -> str:
    """Hydra's first line, or for an unknown key the key and the keys allowed beside it."""
    message = _first_line(exc)
    match = re.match(r"Could not override '([^']+)'", message)
    if not match:
        return message
    key = match.group(1)
    parent, _, leaf = key.rpartition(".")
    node = compose([o for o in overrides if o.partition("=")[0] != key]) if overrides else {}
    for part in parent.split(".") if parent else []:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        where = f"under {parent}" if parent else "at the top level"
        return f"{key}: unknown key '{leaf}'; allowed {where}: {', '.join(sorted(node))}"
    return message


def _check_group_options(overrides: Sequence[str]) -> None:
    """Name the field and the allowed values for an unknown group option (Hydra's own message does not)."""
    problems = []
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key in GROUPS and value and value != "null":
            allowed = group_options(key)
            for choice in value.split(","):
                if choice not in allowed:
                    problems.append(f"{key}: unknown {key} '{choice}'; allowed: {', '.join(allowed)}")
    if problems:
        raise ConfigError(problems)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def spec_from_config(cfg: dict[str, Any]) -> RunSpec:
    """Map a composed config onto RunSpec; invalid values raise ConfigError naming the field."""
    from bench.hardware import CLUSTERS

    train, sweep = cfg.get("train", {}), cfg.get("sweep", {})
    model_cfg = dict(cfg["model"])
    cluster_cfg = dict(cfg["cluster"])
    cluster_name = cluster_cfg.pop("name")
    preset = CLUSTERS.get(cluster_name)
    fields = {
        "sweep": sweep.get("name") or "adhoc",
        "model": model_cfg.pop("name"),
        "model_overrides": {k: v for k, v in model_cfg.items() if v is not None},
        "nodes": cfg.get("nodes"),
        "gpus_per_node": cfg.get("gpus_per_node"),
        "strategy": cfg["strategy"]["name"],
        "precision": cfg["precision"]["name"],
        "cluster": cluster_name,
        "cluster_overrides": _non_null(cluster_cfg),
        "device_type": preset.device_type if preset else "cpu",
        "launcher": cfg["launcher"]["name"],
        "seq_len": train.get("seq_len"),
        "micro_batch": train.get("micro_batch"),
        "grad_accum": train.get("grad_accum"),
        "steps": train.get("steps"),
        "warmup_steps": train.get("warmup_steps"),
        "activation_checkpointing": train.get("activation_checkpointing"),
        "compile": train.get("compile"),
        "compile_backend": train.get("compile_backend"),
        "cpu_offload": train.get("cpu_offload"),
        "seed": train.get("seed"),
        "lr": train.get("lr"),
        "data": train.get("data"),
        "threads_per_rank": train.get("threads_per_rank"),
        "point_timeout_s": sweep.get("point_timeout_s"),
        "debug": cfg.get("debug", {}),
    }
    try:
        return RunSpec.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError([_contract_name(line) for line in describe_validation_error(exc)]) from None


def _non_null(mapping: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            value = _non_null(value) or None
        if value is not None:
            out[key] = value
    return out


# RunSpec field -> the config key a user types, so messages name what to fix.
_CONTRACT_KEYS = {
    "seq_len": "train.seq_len",
    "micro_batch": "train.micro_batch",
    "grad_accum": "train.grad_accum",
    "steps": "train.steps",
    "warmup_steps": "train.warmup_steps",
    "compile": "train.compile",
    "compile_backend": "train.compile_backend",
    "activation_checkpointing": "train.activation_checkpointing",
    "cpu_offload": "train.cpu_offload",
    "seed": "train.seed",
    "lr": "train.lr",
    "data": "train.data",
    "threads_per_rank": "train.threads_per_rank",
    "point_timeout_s": "sweep.point_timeout_s",
}


def _contract_name(line: str) -> str:
    field, sep, rest = line.partition(":")
    return f"{_CONTRACT_KEYS.get(field, field)}{sep}{rest}"


def load_point(overrides: Sequence[str]) -> Point:
    """Compose and validate a single point (the `run` and single-point `plan` path)."""
    if any(is_grid_override(o) for o in overrides):
        raise ConfigError(["a comma-separated override makes a grid: use `fsdp-bench sweep` for grids"])
    cfg = compose(overrides)
    return Point(tuple(overrides), cfg, spec_from_config(cfg))


def is_grid_override(override: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(override).is_sweep_override()
    except Exception:  # malformed: let compose report it
        return False


def expand_grid(overrides: Sequence[str]) -> list[list[str]]:
    """Every point's override list: the experiment's sweep.grid, then the command line's sweeps, crossed."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    fixed = [o for o in overrides if not is_grid_override(o)]
    base = compose(fixed)
    grid = {str(k): str(v) for k, v in (base.get("sweep", {}).get("grid") or {}).items()}
    merged: dict[str, str] = {key: f"{key}={value}" for key, value in grid.items()}
    for item in overrides:  # the command line wins over the experiment's grid
        merged[item.partition("=")[0]] = item
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(list(merged.values()))
    except Exception as exc:
        raise ConfigError([_first_line(exc)]) from None
    return BasicSweeper.split_arguments(parsed, None)[0]


def load_grid(overrides: Sequence[str]) -> list[Point]:
    """Compose and validate every point of a grid; all invalid points are reported together."""
    points, problems = [], []
    for point_overrides in expand_grid(overrides):
        try:
            cfg = compose(point_overrides)
            points.append(Point(tuple(point_overrides), cfg, spec_from_config(cfg)))
        except ConfigError as exc:
            label = " ".join(o for o in point_overrides if o.partition("=")[0] != "experiment")
            problems.extend(f"[{label}] {line}" for line in exc.lines)
    if problems:
        raise ConfigError(problems)
    return points
