"""A composed config validated into a RunSpec, and a grid's configs validated a section at a time.

`spec_from_config` is the one validation: the model's and cluster's node get `overrides` (what
differs from the named preset, for labels), a user's `selective` becomes torchtitan's per-op mode,
pydantic validates the whole `RunSpec` (bench/schema/spec.py) and the launch rules
(bench/config/rules.py) judge it; every problem is one line naming the key (and a user's file).

`GridValidator` gives the same specs for the points of one grid at a fraction of the cost. A grid's
configs share their sections (compose hands every point with the same model choice the same model
node, every point with the same `train.*` values the same train node), so each distinct section
node is prepared and validated once, and each point's `RunSpec` is validated from those section
objects: pydantic takes an instance of a section's own model as already validated (its model
validators run again, and each leaves a valid section as it is), and checks the point's own fields
(strategy, precision, launcher, nodes, ranks per node) and the spec's cross-section rules as for any
config. Sections are shared between the grid's specs, read-only like the configs they came from.
A train section whose sequence is null is shared only by points of the same model object: the spec
fills it with that model's default, once. Any validation error sends the point through
`spec_from_config`, so its problems are said exactly as they always were.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.config.groups import alone, copy_tree, to_plain
from bench.config.problems import ConfigError, describe_validation_error
from bench.config.registry import REGISTRY_GROUPS, describe_source, option_files, search_dirs
from bench.config.rules import launch_problems
from bench.schema.ac_modes import ALIAS_NOTE, resolve_user_mode
from bench.schema.model import ModelSpec
from bench.schema.spec import ClusterSpec, DebugKnobs, ProfileSpec, RunSpec, TelemetrySpec, TrainSpec

# The sections a grid's points share, with the model each is validated as.
SECTIONS = {
    "model": ModelSpec,
    "cluster": ClusterSpec,
    "train": TrainSpec,
    "debug": DebugKnobs,
    "telemetry": TelemetrySpec,
    "profile": ProfileSpec,
}


def spec_from_config(cfg: dict[str, Any]) -> RunSpec:
    """Validate a composed config into a RunSpec; problems raise ConfigError naming the key (and a user file)."""
    dirs = search_dirs()
    cfg = {**cfg, **{key: prepared(key, cfg[key], dirs) for key in SECTIONS if isinstance(cfg.get(key), dict)}}
    try:
        spec = RunSpec.from_config(cfg)
    except ValidationError as exc:
        raise ConfigError([_name_source(cfg, line) for line in describe_validation_error(exc)]) from None
    problems = launch_problems(spec)
    if problems:
        raise ConfigError(problems)
    return spec


def prepared(key: str, node: dict[str, Any], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """A section's node as it is validated: the model's and cluster's with `overrides`, the train's
    with the checkpointing alias resolved, the others as they are."""
    if key in ("model", "cluster"):
        return with_overrides(key, node, dirs)
    if key == "train":
        return _resolve_ac_alias(node)
    return node


class GridValidator:
    """Validates the points of one grid, each distinct section node once (the module docstring).
    Holds the nodes it has seen, so an id stays theirs while it lives: use one per grid."""

    def __init__(self) -> None:
        self._dirs = search_dirs()
        # (section, id of its node, id of the model a train without a sequence is for) -> (the node
        # and that model, kept so their ids stay theirs; the validated section or None)
        self._sections: dict[tuple[str, int, int], tuple[Any, Any]] = {}

    def spec(self, cfg: dict[str, Any]) -> RunSpec:
        """The spec of one composed config of the grid: `spec_from_config(cfg)`."""
        fields = RunSpec.config_fields(cfg)
        for key in SECTIONS:
            node = fields.get(key)
            if isinstance(node, dict):
                section = self._section(key, node, fields)
                if section is None:
                    return spec_from_config(cfg)
                fields[key] = section
        try:
            spec = RunSpec.model_validate(fields)
        except ValidationError:
            return spec_from_config(cfg)
        problems = launch_problems(spec)
        if problems:
            raise ConfigError(problems)
        return spec

    def _section(self, key: str, node: dict[str, Any], fields: dict[str, Any]) -> Any:
        """The validated section of a node (None where it does not validate alone)."""
        model = fields.get("model")
        # The spec fills a null sequence from its model, in the train section itself.
        owner = id(model) if key == "train" and node.get("seq_len") is None else 0
        entry = self._sections.get((key, id(node), owner))
        if entry is None:
            try:
                section = SECTIONS[key].model_validate(prepared(key, node, self._dirs))
            except (ValidationError, ConfigError):
                section = None
            entry = self._sections[key, id(node), owner] = ((node, model), section)
        return entry[1]


_alias_noted: set[str] = set()


def _resolve_ac_alias(train: dict[str, Any]) -> dict[str, Any]:
    """A user's `selective` is torchtitan's per-op policy (bench/schema/ac_modes.py); said once per process."""
    mode = train.get("activation_checkpointing")
    if not isinstance(mode, str) or resolve_user_mode(mode) == mode:
        return train
    if mode not in _alias_noted:
        _alias_noted.add(mode)
        print(ALIAS_NOTE, file=sys.stderr)
    return {**train, "activation_checkpointing": resolve_user_mode(mode)}


def with_overrides(group: str, node: dict[str, Any], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """The group's node with `overrides`: what differs from the named preset (for labels)."""
    node = dict(node)
    flat = _flat_preset(group, str(node.get("name")), dirs)
    if flat is not None:
        node["overrides"] = {k: v for k, v in _flatten(node).items() if flat.get(k, object()) != v}
    return node


@lru_cache(maxsize=128)
def _flat_preset(group: str, name: str, dirs: tuple[Path, ...]) -> dict[str, Any] | None:
    node = resolved_preset(group, name, dirs)
    return None if node is None else _flatten(node)


@lru_cache(maxsize=128)
def resolved_preset(group: str, name: str, dirs: tuple[Path, ...]) -> dict[str, Any] | None:
    """A model or cluster option composed alone (its defaults list resolved), or None if unknown."""
    if name not in option_files(group, dirs):
        return None
    from omegaconf import OmegaConf

    return to_plain(OmegaConf.create(copy_tree(alone(group, name, dirs))))[group]


def _flatten(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in node.items():
        if key in ("overrides", "source", "name"):
            continue
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        elif value is not None:
            out[f"{prefix}{key}"] = value
    return out


def _name_source(cfg: dict[str, Any], line: str) -> str:
    """Prefix a problem inside a user's model/cluster file with that file."""
    group = line.split(".", 1)[0].split(":", 1)[0]
    if group in REGISTRY_GROUPS and isinstance(cfg.get(group), dict):
        where = describe_source(group, str(cfg[group].get("name")))
        if "(" in where:
            return f"{where}: {line}"
    return line
