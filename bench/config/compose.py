"""Compose the Hydra config tree (sweeps/ plus the user's config folders) into validated RunSpecs.

Hydra runs here, in the parent process only; ranks receive a resolved JSON spec. The grid of a
sweep is the cartesian product of comma-separated overrides (Hydra's BasicSweeper rules), taken
from the command line and from the experiment's `sweep.grid`.

Composing is split in two, with the same result as one Hydra compose per point: Hydra composes
each distinct combination of config-group choices (`model=`, `cluster=`, `experiment=`, ...)
once, and each point's scalar overrides (`train.seq_len=128`, `model.n_layers=2`) are applied on
top of a copy the way Hydra applies them (OmegaConf.update, merge=True; `+` adds, `~` deletes).
A grid of thousands of points then costs one compose per group combination, not per point.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.config.problems import ConfigError, describe_validation_error
from bench.config.registry import (
    GROUPS,
    REGISTRY_GROUPS,
    RegistryError,
    describe_source,
    group_options,
    option_files,
    search_dirs,
)
from bench.config.rules import launch_problems
from bench.schema.ac_modes import ALIAS_NOTE, resolve_user_mode
from bench.schema.model import ModelSpec
from bench.schema.spec import ClusterSpec, RunSpec


@dataclass(frozen=True)
class Point:
    """One composed point: its overrides (for the `reproduce` line), config and validated spec."""

    overrides: tuple[str, ...]
    config: dict[str, Any]
    spec: RunSpec


@lru_cache(maxsize=1)
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _parse(overrides: Sequence[str]) -> list:
    return [_parse_one(item) for item in overrides]


@lru_cache(maxsize=65536)
def _parse_one(override: str):
    """One override parsed by Hydra's grammar (cached: a grid repeats the same strings across its
    points, and the parser costs about a millisecond each). Callers only read the result."""
    try:
        return _parser().parse_overrides([override])[0]
    except Exception as exc:  # Hydra's grammar errors: one line
        raise ConfigError([_first_line(exc)]) from None


def _is_group_choice(override) -> bool:
    """`model=tiny`, `+experiment=x`: a config-group choice (composed by Hydra) rather than a value."""
    key = override.key_or_group
    return key in GROUPS or key.startswith("hydra")


def compose(overrides: Sequence[str]) -> dict[str, Any]:
    """One point's config as a plain dict; unknown group options and keys raise ConfigError."""
    # Before parsing: a value with shell syntax is an unknown option, not a grammar error.
    _check_group_options(overrides)
    parsed = _parse(overrides)
    choices = tuple(o.input_line for o in parsed if _is_group_choice(o))
    scalars = [o for o in parsed if not _is_group_choice(o)]
    dirs = search_dirs()
    groups, interpolates = _combined_groups(choices, dirs)
    if not interpolates and all(_plain_settable(groups, o) for o in scalars):
        # The common case (existing keys set to plain values, no interpolation to resolve), in
        # plain Python: what OmegaConf.update followed by to_container gives, 50x cheaper.
        return _with_values(groups, [(o.key_or_group, o.value()) for o in scalars])
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(_copy_tree(groups))
    OmegaConf.set_struct(cfg, True)
    for override in scalars:
        _apply(cfg, override)
    return _to_dict(cfg)


# Groups whose choice can be composed apart from the others and combined (`_combined_groups`);
# an experiment (which may set anything and override other groups' choices) is always composed whole.
SEPARABLE_GROUPS = ("model", "strategy", "precision", "cluster", "launcher")


@lru_cache(maxsize=4096)
def _combined_groups(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> tuple[dict[str, Any], bool]:
    """(config, whether it holds an interpolation) for these group choices."""
    config = _combine(choices, dirs)
    return config, _has_interpolation(config)


def _combine(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """The config Hydra composes for these group choices, built from fewer Hydra composes.

    Hydra merges each selected option under its own package, in the defaults list's order. A
    choice `model=X` is *separable* when composing it on top of the other (structural) choices
    changes nothing but the `model` node. Then the full config is the structural compose with each
    separable group's node taken from its own compose (which includes whatever the experiment
    and the primary config merge into that node after the option). So a grid of 4 models x 5
    strategies x 3 precisions costs 1 + 4 + 5 + 3 Hydra composes instead of 60. A choice that
    changes other nodes too (a defaults list that reaches outside its package) makes the whole
    combination a single Hydra compose.
    """
    parsed = _parse(choices)
    separable = [
        o for o in parsed
        if o.key_or_group in SEPARABLE_GROUPS and not (o.is_add() or o.is_delete() or o.is_force_add())
    ]  # fmt: skip
    keys = [o.key_or_group for o in separable]
    if len(separable) < 2 or len(set(keys)) < len(keys):
        return compose_groups(choices, dirs)
    structural = tuple(o.input_line for o in parsed if all(o is not s for s in separable))
    base = compose_groups(structural, dirs)
    combined = dict(base)
    for override in separable:
        group = override.key_or_group
        alone = compose_groups((*structural, override.input_line), dirs)
        others_changed = {k: v for k, v in alone.items() if k != group} != {k: v for k, v in base.items() if k != group}
        if others_changed or group not in alone:
            return compose_groups(choices, dirs)
        combined[group] = alone[group]
    return combined


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_has_interpolation(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return isinstance(node, str) and "$" in node


def _with_values(cfg: dict[str, Any], values: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """A copy of `cfg` with dotted keys set: the mappings on each key's path are copied, the
    untouched sections are shared with `cfg` (so a point's config is read-only, as is every
    cached composition)."""
    out = dict(cfg)
    copied: set[tuple[str, ...]] = {()}
    for key, value in values:
        *parents, leaf = key.split(".")
        node = out
        for depth, part in enumerate(parents, 1):
            if tuple(parents[:depth]) not in copied:
                node[part] = dict(node[part])
                copied.add(tuple(parents[:depth]))
            node = node[part]
        node[leaf] = value
    return out


def _copy_tree(node: Any) -> Any:
    """A deep copy of plain dicts and lists (copy.deepcopy's generality costs 10x)."""
    if isinstance(node, dict):
        return {k: _copy_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy_tree(v) for v in node]
    return node


_PLAIN_VALUES = (int, float, bool, type(None))


def _plain_settable(cfg: dict[str, Any], override) -> bool:
    """Whether `key=value` may be applied in plain Python with OmegaConf's result: a change (not
    `+`, `++` or `~`) of an existing leaf (not a mapping or list) to a scalar that OmegaConf would
    store as given (no `$`, which could be an interpolation)."""
    if override.is_delete() or override.is_add() or override.is_force_add() or override.is_sweep_override():
        return False
    value = override.value()
    if not (isinstance(value, _PLAIN_VALUES) or (isinstance(value, str) and "$" not in value)):
        return False
    node: Any = cfg
    for part in override.key_or_group.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return not isinstance(node, dict | list)


@lru_cache(maxsize=512)
def compose_groups(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """Hydra's compose of the group choices alone, as plain containers (interpolations unresolved),
    without Hydra's own node; cached: the expensive part of composing. Callers never modify it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    searchpath = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs[1:])}]"] if len(dirs) > 1 else []
    try:
        with initialize_config_dir(config_dir=str(dirs[0]), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=[*choices, *searchpath])
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        # ValueError: Hydra's own complaint about malformed overrides such as `experiment=null`.
        raise ConfigError([_explain_group_error(exc)]) from None
    with_hydra = OmegaConf.to_container(cfg, resolve=False)
    with_hydra.pop("hydra", None)
    return with_hydra


def _apply(cfg, override) -> None:
    """Apply one scalar override as Hydra does (`key=v` changes an existing key, `+key=v` adds one,
    `++key=v` adds or changes, `~key` deletes)."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    key, value = override.key_or_group, override.value()
    try:
        if override.is_delete():
            # Hydra's rules: a key whose value is null counts as absent; `~key=v` deletes only v.
            current = OmegaConf.select(cfg, key, throw_on_missing=False)
            if current is None:
                raise ConfigError([f"{key}: cannot delete: no such key (or it is null)"])
            if value is not None and value != current:
                raise ConfigError([f"{key}: cannot delete: its value is {current}, not {value}"])
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            with open_dict(node):
                del node[leaf]
        elif override.is_add() or override.is_force_add():
            taken = OmegaConf.select(cfg, key, throw_on_missing=False) is not None
            if override.is_add() and taken and not isinstance(value, dict | list):
                raise ConfigError([f"{key}: already set; use {key}=... to change it"])
            with open_dict(cfg):
                OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        else:
            if not _has_key(cfg, key):
                raise ConfigError([_unknown_key(cfg, key)])
            OmegaConf.update(cfg, key, value, merge=True)
    except OmegaConfBaseException as exc:
        raise ConfigError([f"{key}: {_first_line(exc)}"]) from None


def _has_key(cfg, dotted: str) -> bool:
    node = cfg
    for part in dotted.split("."):
        if not hasattr(node, "keys") or part not in node:
            return False
        node = node[part]
    return True


def _unknown_key(cfg, key: str) -> str:
    """An unknown key named with the keys allowed beside it."""
    parent, _, leaf = key.rpartition(".")
    node = cfg
    for part in parent.split(".") if parent else []:
        node = node.get(part) if hasattr(node, "keys") else None
    if hasattr(node, "keys"):
        where = f"under {parent}" if parent else "at the top level"
        return f"{key}: unknown key '{leaf}'; allowed {where}: {', '.join(sorted(node.keys()))}"
    return f"{key}: unknown key"


def _to_dict(cfg) -> dict[str, Any]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise ConfigError([_first_line(exc)]) from None


def _explain_group_error(exc: Exception) -> str:
    """Hydra's first line, with a user file's unknown device named as such."""
    message = _first_line(exc)
    match = re.search(r"Could not (?:load|find) '(?:/)?device/([^']+)'", message)
    if match:
        return f"cluster: device: unknown device '{match.group(1)}'; allowed: {', '.join(group_options('device'))}"
    return message


def _check_group_options(choices: Sequence[str]) -> None:
    """Name the field and the allowed values for an unknown group option (Hydra's own message does not)."""
    dirs = search_dirs()
    problems = [line for item in choices for line in _group_option_problems(item, dirs)]
    if problems:
        raise ConfigError(problems)


@lru_cache(maxsize=4096)
def _group_option_problems(item: str, dirs: tuple[Path, ...]) -> tuple[str, ...]:
    key, _, value = item.lstrip("+~").partition("=")
    if key not in GROUPS or not value or value == "null":
        return ()
    try:
        allowed = group_options(key)
    except RegistryError as exc:
        raise ConfigError([str(exc)]) from None
    return tuple(
        f"{key}: unknown {key} '{v}'; allowed: {', '.join(allowed)}" for v in value.split(",") if v not in allowed
    )


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def spec_from_config(cfg: dict[str, Any]) -> RunSpec:
    """Validate a composed config into a RunSpec; problems raise ConfigError naming the key (and a user file)."""
    cfg = {**cfg, **{group: _with_overrides(cfg, group) for group in ("model", "cluster") if group in cfg}}
    cfg = _resolve_ac_alias(cfg)
    try:
        spec = RunSpec.from_config(cfg)
    except ValidationError as exc:
        raise ConfigError([_name_source(cfg, line) for line in describe_validation_error(exc)]) from None
    problems = launch_problems(spec)
    if problems:
        raise ConfigError(problems)
    return spec


_alias_noted: set[str] = set()


def _resolve_ac_alias(cfg: dict[str, Any]) -> dict[str, Any]:
    """A user's `selective` is torchtitan's per-op policy (bench/schema/ac_modes.py); said once per process."""
    train = cfg.get("train")
    mode = train.get("activation_checkpointing") if isinstance(train, dict) else None
    if not isinstance(mode, str) or resolve_user_mode(mode) == mode:
        return cfg
    if mode not in _alias_noted:
        _alias_noted.add(mode)
        print(ALIAS_NOTE, file=sys.stderr)
    return {**cfg, "train": {**train, "activation_checkpointing": resolve_user_mode(mode)}}


def _with_overrides(cfg: dict[str, Any], group: str) -> dict[str, Any]:
    """The group's node with `overrides`: what differs from the named preset (for labels)."""
    node = dict(cfg[group])
    preset = _flat_preset(group, str(node.get("name")), search_dirs())
    if preset is not None:
        node["overrides"] = {k: v for k, v in _flatten(node).items() if preset.get(k, object()) != v}
    return node


@lru_cache(maxsize=128)
def _flat_preset(group: str, name: str, dirs: tuple[Path, ...]) -> dict[str, Any] | None:
    preset = _preset(group, name, dirs)
    return None if preset is None else _flatten(preset)


@lru_cache(maxsize=128)
def _preset(group: str, name: str, dirs: tuple[Path, ...]) -> dict[str, Any] | None:
    """A model or cluster option composed alone (its defaults list resolved), or None if unknown."""
    if name not in option_files(group):
        return None
    from omegaconf import OmegaConf

    return _to_dict(OmegaConf.create(_copy_tree(compose_groups((f"{group}={name}",), dirs))))[group]


def load_preset(group: str, name: str):
    """A model or cluster preset of the registry, validated (ModelSpec or ClusterSpec)."""
    node = _preset(group, name, search_dirs())
    if node is None:
        raise ConfigError([f"{group}: unknown {group} '{name}'; allowed: {', '.join(group_options(group))}"])
    model = {"model": ModelSpec, "cluster": ClusterSpec}[group]
    try:
        return model.model_validate(node)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, f"{describe_source(group, name)}: ")) from None


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


def load_point(overrides: Sequence[str]) -> Point:
    """Compose and validate a single point (the `run` and single-point `plan` path)."""
    if any(is_grid_override(o) for o in overrides):
        raise ConfigError(["a comma-separated override makes a grid: use `fsdp-bench sweep` for grids"])
    cfg = compose(overrides)
    return Point(tuple(overrides), cfg, spec_from_config(cfg))


def is_grid_override(override: str) -> bool:
    try:
        return _parser().parse_override(override).is_sweep_override()
    except Exception:  # malformed: let compose report it
        return False


def grid_items(overrides: Sequence[str]) -> dict[str, str]:
    """key -> override of a grid: the experiment's sweep.grid, then the command line (which wins)."""
    fixed = [o for o in overrides if not is_grid_override(o)]
    base = compose(fixed)
    grid = {str(k): str(v) for k, v in (base.get("sweep", {}).get("grid") or {}).items()}
    merged: dict[str, str] = {key: f"{key}={value}" for key, value in grid.items()}
    for item in overrides:
        merged[item.partition("=")[0]] = item
    return merged


def sweep_values(override: str) -> list[str]:
    """The values a (possibly comma-separated) override gives, as strings: `a=1,2` -> ['1', '2']."""
    parsed = _parse_one(override)
    return list(parsed.sweep_string_iterator()) if parsed.is_sweep_override() else [parsed.get_value_element_as_str()]


def expand_grid(overrides: Sequence[str]) -> list[list[str]]:
    """Every point's override list: the experiment's sweep.grid, then the command line's sweeps, crossed."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper.split_arguments(_parse(list(grid_items(overrides).values())), None)[0]


def load_grid(overrides: Sequence[str]) -> list[Point]:
    """Compose and validate every point of a grid; all invalid points are reported together."""
    points, invalid = load_points(expand_grid(overrides))
    if invalid:
        raise ConfigError([line for _, lines in invalid for line in lines])
    return points


def load_points(grid: Sequence[Sequence[str]]) -> tuple[list[Point], list[tuple[tuple[str, ...], list[str]]]]:
    """Compose and validate each point's overrides: (valid points, [(overrides, problems)] of the
    others, each problem prefixed with the point's overrides)."""
    points, invalid = [], []
    for point_overrides in grid:
        try:
            cfg = compose(point_overrides)
            points.append(Point(tuple(point_overrides), cfg, spec_from_config(cfg)))
        except ConfigError as exc:
            label = " ".join(o for o in point_overrides if o.partition("=")[0] != "experiment")
            invalid.append((tuple(point_overrides), [f"[{label}] {line}" for line in exc.lines]))
    return points, invalid


def overrides_from_fields(fields: dict[str, Any]) -> list[str]:
    """Override strings for fields given in Python: config keys (`nodes`, `train.seq_len`), group
    choices (`model`, `cluster`), the `train` fields by their own names (`seq_len`), and mappings
    for a section (`debug={"fail_rank": 1}`, `model={"n_layers": 2}`)."""
    from bench.schema.spec import TrainSpec

    out = []
    for key, value in fields.items():
        if key in TrainSpec.model_fields:
            key = f"train.{key}"
        if isinstance(value, dict):
            out += [f"{key}.{sub}={_override_value(v)}" for sub, v in value.items()]
        else:
            out.append(f"{key}={_override_value(value)}")
    return out


def _override_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not re.fullmatch(r"[\w./:+-]+", value):
        return "'" + value.replace("'", "\\'") + "'"
    return str(value)


def spec_from_fields(repeat: int = 0, **fields: Any) -> RunSpec:
    """A validated spec from Python keyword fields (see overrides_from_fields), as `run` would compose it."""
    spec = load_point(overrides_from_fields(fields)).spec
    return spec.model_copy(update={"repeat": repeat}) if repeat else spec


def flavors() -> dict[str, ModelSpec]:
    """Every model preset of the registry, by name (model files have no defaults list, so they are
    read as plain YAML: cheap enough for every rank of a test)."""
    from bench.config.registry import load_plain

    return {name: ModelSpec.model_validate(load_plain("model", name)) for name in group_options("model")}


def sweep_options(cfg: dict[str, Any]):
    """The config's `sweep.*` validated (bench.schema.options.SweepOptions); ConfigError naming the key."""
    from bench.schema.options import SweepOptions

    try:
        return SweepOptions.model_validate(cfg.get("sweep") or {})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "sweep.")) from None


# A preflight's largest message may take at most this share of a device's memory (an all-gather
# holds its output and its input at once, and the allocator needs room).
PREFLIGHT_MEMORY_SHARE = 0.25


def preflight_settings(cfg: dict[str, Any], spec: RunSpec):
    """The config's `preflight.*` validated for this point's devices; ConfigError naming the key."""
    from bench.schema.options import PreflightSettings

    try:
        settings = PreflightSettings.model_validate(cfg.get("preflight") or {})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "preflight.")) from None
    memory = spec.cluster.device_memory_gib * 2**30
    if settings.max_bytes is not None and 2 * settings.max_bytes > PREFLIGHT_MEMORY_SHARE * memory:
        allowed = int(PREFLIGHT_MEMORY_SHARE * memory / 2)
        raise ConfigError(
            [
                f"preflight.max_bytes: {settings.max_bytes:,} bytes needs about twice that on each device, beyond "
                f"{PREFLIGHT_MEMORY_SHARE:.0%} of {spec.cluster.name}'s {spec.cluster.device_memory_gib:g} GiB; allowed: "
                f"<= {allowed:,}"
            ]
        )
    return settings
