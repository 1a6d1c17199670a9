"""Compose the Hydra config tree (sweeps/ plus the user's config folders) into validated RunSpecs.

Hydra runs here, in the parent process only; ranks receive a resolved JSON spec. The grid of a
sweep is the cartesian product of the values of its overrides (`a,b`, `range(...)`, `choice(...)`,
`glob(...)` of a group's options, as Hydra's basic sweeper reads them), taken from the experiment's
`sweep.grid` and the command line (`expand_grid`).

Composing is split in two, with the same result as one Hydra compose per point: Hydra composes
each distinct combination of config-group choices (`model=`, `cluster=`, `experiment=`, ...)
once, from as few composes as the grid allows (bench/config/groups.py), and each point's scalar
overrides (`train.seq_len=128`, `model.n_layers=2`) are applied on top of a copy the way Hydra
applies them (OmegaConf.update, merge=True; `+` adds, `~` deletes). A grid of thousands of points
then costs a few composes, not one per point; points whose overrides of a section are the same
get the same section node, which the grid's validation (bench/config/validate.py) validates once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.config.groups import combined_groups, copy_tree, parse, parse_one, parser, to_plain
from bench.config.problems import ConfigError, describe_validation_error, did_you_mean, first_line
from bench.config.registry import GROUPS, RegistryError, describe_source, group_options, search_dirs
from bench.config.validate import GridValidator, resolved_preset, spec_from_config
from bench.schema.model import ModelSpec
from bench.schema.spec import ClusterSpec, RunSpec


@dataclass(frozen=True)
class Point:
    """One composed point: its overrides (for the `reproduce` line), config and validated spec."""

    overrides: tuple[str, ...]
    config: dict[str, Any]
    spec: RunSpec


def _is_group_choice(override) -> bool:
    """`model=tiny`, `+experiment=x`: a config-group choice (composed by Hydra) rather than a value."""
    key = override.key_or_group
    return key in GROUPS or key.startswith("hydra")


@lru_cache(maxsize=65536)
def _classified(item: str) -> tuple[Any, bool]:
    """(the parsed override, whether it is a group choice), cached like `parse_one`: a grid's points
    repeat the same strings, and each point is classified twice (`_choices`, `_compose`)."""
    override = parse_one(item)
    return override, _is_group_choice(override)


# A price given on the command line is the user's own: the preset's source and date do not describe it.
_PRICE, _PRICE_PROVENANCE = "cluster.usd_per_node_hour", ("cluster.price_source", "cluster.price_as_of")


def _split(overrides: Sequence[str]) -> tuple[tuple[str, ...], list]:
    """A point's (group choices as written, parsed scalar overrides), in their order; a price given
    without its source and date clears the preset's."""
    classified = [_classified(item) for item in overrides]
    scalars = [o for o, choice in classified if not choice]
    if any(o.key_or_group == _PRICE for o in scalars):
        given = {o.key_or_group for o in scalars}
        scalars += [_classified(f"{key}=null")[0] for key in _PRICE_PROVENANCE if key not in given]
    return tuple(o.input_line for o, choice in classified if choice), scalars


def compose(overrides: Sequence[str]) -> dict[str, Any]:
    """One point's config as a plain dict; unknown group options and keys raise ConfigError."""
    return _compose(overrides, search_dirs())


def _compose(overrides: Sequence[str], dirs: tuple[Path, ...]) -> dict[str, Any]:
    # Before parsing: a value with shell syntax is an unknown option, not a grammar error.
    _check_group_options(overrides, dirs)
    choices, scalars = _split(overrides)
    groups = _groups(choices, dirs)
    plain = None if groups.interpolates else groups.with_values(scalars)
    if plain is not None:
        return plain
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(copy_tree(groups.config))
    OmegaConf.set_struct(cfg, True)
    for override in scalars:
        _apply(cfg, override)
    return to_plain(cfg)


@dataclass
class _Groups:
    """A combination of group choices composed (`config`, read-only), and the section nodes its
    points' scalar overrides gave (`with_values`)."""

    config: dict[str, Any]
    interpolates: bool
    sections: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict)

    def with_values(self, scalars: Sequence) -> dict[str, Any] | None:
        """The config with these scalar overrides, in plain Python, or None where one of them needs
        OmegaConf (`_plain_settable`): what OmegaConf.update followed by to_container gives, without
        building an OmegaConf tree per point. Each top-level section with the same overrides is the
        same node for every point (read-only, as is every cached composition)."""
        by_section: dict[str, list] = {}
        for override in scalars:
            by_section.setdefault(override.key_or_group.partition(".")[0], []).append(override)
        out = dict(self.config)
        for top, overrides in by_section.items():
            key = (top, tuple(o.input_line for o in overrides))
            node = self.sections.get(key, _MISSING)
            if node is _MISSING:
                if len(self.sections) >= _SECTIONS_LIMIT:
                    self.sections.clear()
                node = self.sections[key] = self._section(top, overrides)
            if node is _NOT_PLAIN:
                return None
            out[top] = node
        return out

    def _section(self, top: str, overrides: Sequence) -> Any:
        if not all(_plain_settable(self.config, o) for o in overrides):
            return _NOT_PLAIN
        return _with_values({top: self.config[top]}, [(o.key_or_group, o.value()) for o in overrides])[top]


_MISSING, _NOT_PLAIN = object(), object()
_SECTIONS_LIMIT = 4096  # distinct section overrides kept per group combination


@lru_cache(maxsize=4096)
def _groups(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> _Groups:
    config = combined_groups(choices, dirs)
    return _Groups(config, _has_interpolation(config))


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_has_interpolation(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return isinstance(node, str) and "$" in node


def _with_values(cfg: dict[str, Any], values: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """A copy of `cfg` with dotted keys set: the mappings on each key's path are copied, the
    untouched sections are shared with `cfg`."""
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
        raise ConfigError([f"{key}: {first_line(exc)}"]) from None


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
        allowed = sorted(node.keys())
        return f"{key}: unknown key '{leaf}'{did_you_mean(leaf, allowed)}; allowed {where}: {', '.join(allowed)}"
    return f"{key}: unknown key"


def _check_group_options(choices: Sequence[str], dirs: tuple[Path, ...]) -> None:
    """Name the field and the allowed values for an unknown group option (Hydra's own message does not)."""
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
        f"{key}: unknown {key} '{v}'{did_you_mean(v, allowed)}; allowed: {', '.join(allowed)}"
        for v in value.split(",")
        if v not in allowed
    )


def load_preset(group: str, name: str):
    """A model or cluster preset of the registry, validated (ModelSpec or ClusterSpec)."""
    node = resolved_preset(group, name, search_dirs())
    if node is None:
        allowed = group_options(group)
        raise ConfigError(
            [f"{group}: unknown {group} '{name}'{did_you_mean(name, allowed)}; allowed: {', '.join(allowed)}"]
        )
    model = {"model": ModelSpec, "cluster": ClusterSpec}[group]
    try:
        return model.model_validate(node)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, f"{describe_source(group, name)}: ")) from None


# Every form of Hydra sweep has one of these in its value: a choice's commas or a sweep function's call.
_SWEEP_MARKS = (",", "(")


def load_point(overrides: Sequence[str]) -> Point:
    """Compose and validate a single point (the `run` and single-point `plan` path)."""
    refuse_grid(overrides)
    cfg = compose(overrides)
    return Point(tuple(overrides), cfg, spec_from_config(cfg))


def refuse_grid(overrides: Sequence[str]) -> None:
    """ConfigError for a command line that makes a grid, where a command takes one point (`run`, `preflight`)."""
    if any(is_grid_override(o) for o in overrides):
        raise ConfigError(["a comma-separated override makes a grid: use `fsdp-bench sweep` for grids"])


def is_grid_override(override: str) -> bool:
    """Whether Hydra reads `override` as a sweep (`a,b`, `range(...)`, `choice(...)`, `glob(...)`, ...)."""
    if not any(mark in override.partition("=")[2] for mark in _SWEEP_MARKS):
        return False  # no sweep without a comma or a call: most overrides never reach Hydra's parser
    try:
        return parser().parse_override(override).is_sweep_override()
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
    return _values(parse_one(override))


def _values(override) -> list[str]:
    """The values of a parsed override as strings, as Hydra's basic sweeper lists them; a glob
    chooses among a config group's options (the registry's, `_`-files excluded)."""
    if not override.is_sweep_override():
        return [override.get_value_element_as_str()]
    key = override.get_key_element()
    if override.is_interval_sweep():
        raise ConfigError(
            [f"{key}: interval(...) has no values to list; allowed: a,b,..., range(...), choice(...), glob(...)"]
        )
    from hydra.core.override_parser.types import Glob

    value = override.value()
    if isinstance(value, Glob):
        if override.key_or_group not in GROUPS:
            raise ConfigError([f"{key}: glob(...) lists a config group's options; allowed: {', '.join(GROUPS)}"])
        return value.filter(group_options(override.key_or_group))
    return list(override.sweep_string_iterator())


def expand_grid(overrides: Sequence[str]) -> list[list[str]]:
    """Every point's override list: the experiment's sweep.grid, then the command line's sweeps,
    crossed as Hydra's basic sweeper crosses them: one axis per key (prefix and package included)
    in the order the keys come, a later override of a key replacing its values, the first axis
    varying slowest."""
    axes: dict[str, list[str]] = {}
    for override in parse(list(grid_items(overrides).values())):
        key = override.get_key_element()
        axes[key] = [f"{key}={value}" for value in _values(override)]
    return [list(point) for point in itertools.product(*axes.values())]


def load_grid(overrides: Sequence[str]) -> list[Point]:
    """Compose and validate every point of a grid; all invalid points are reported together."""
    points, invalid = load_points(expand_grid(overrides))
    if invalid:
        raise ConfigError([line for _, lines in invalid for line in lines])
    return points


def load_points(grid: Sequence[Sequence[str]]) -> tuple[list[Point], list[tuple[tuple[str, ...], list[str]]]]:
    """Compose and validate each point's overrides: (valid points, [(overrides, problems)] of the
    others, each problem prefixed with the point's overrides). The grid's sections are validated
    once each (bench/config/validate.py `GridValidator`): the same points as one by one."""
    dirs = search_dirs()
    validator = GridValidator()
    points, invalid = [], []
    for point_overrides in grid:
        try:
            cfg = _compose(point_overrides, dirs)
            points.append(Point(tuple(point_overrides), cfg, validator.spec(cfg)))
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
