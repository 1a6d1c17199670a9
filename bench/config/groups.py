"""Hydra's composes of config-group choices (`model=`, `strategy=`, `experiment=`, ...), through
Hydra's public compose API, as few of them as a grid allows, with the result one compose gives.

`compose_groups` is one compose (`hydra.initialize_config_dir` and `hydra.compose`), cached per set
of choices. `combined_groups` gives the config of a set of choices from fewer of them: a grid's
points differ in a few *separable* choices (`model=`, `strategy=`, `precision=`, `cluster=`,
`launcher=`), and a separable choice whose compose on top of the other, *structural* choices (the
experiment, Hydra's own, `+`/`~` group overrides) changes nothing but its own node is taken from
there. So 4 models x 5 strategies x 3 precisions cost 1 + 4 + 5 + 3 composes, not 60. A choice
that writes outside its node (a `# @package _global_` option) makes the combination one whole
compose. Overrides are parsed by Hydra's public grammar (`OverridesParser`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.config.problems import ConfigError, did_you_mean, first_line
from bench.config.registry import group_options

# Groups whose choice can be composed apart from the others and combined (`combined_groups`);
# an experiment (which may set anything and override other groups' choices) is always composed whole.
SEPARABLE_GROUPS = ("model", "strategy", "precision", "cluster", "launcher")


@lru_cache(maxsize=1)
def parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@lru_cache(maxsize=65536)
def parse_one(override: str):
    """One override parsed by Hydra's grammar; cached, because a grid repeats the same strings across
    its points and the grammar's parser is slow next to a dict lookup. Callers only read the result."""
    try:
        return parser().parse_overrides([override])[0]
    except Exception as exc:  # Hydra's grammar errors: one line
        raise ConfigError([first_line(exc)]) from None


def parse(overrides: Sequence[str]) -> list:
    return [parse_one(item) for item in overrides]


@lru_cache(maxsize=512)
def compose_groups(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """Hydra's compose of the group choices alone, as plain containers (interpolations unresolved,
    without Hydra's own node); cached, and never modified by callers. The user's folders join the
    search path after the shipped tree as `hydra.searchpath` (what `--config-dir` means to Hydra)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    searchpath = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs[1:])}]"] if len(dirs) > 1 else []
    try:
        with initialize_config_dir(config_dir=str(dirs[0]), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*choices, *searchpath])
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        # ValueError: Hydra's own complaint about malformed overrides such as `experiment=null`.
        raise ConfigError([_explain_group_error(exc)]) from None
    return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]


def copy_tree(node: Any) -> Any:
    """A deep copy of plain dicts and lists (all a composed config holds, so copy.deepcopy's
    bookkeeping for shared and arbitrary objects is not needed)."""
    if isinstance(node, dict):
        return {k: copy_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [copy_tree(v) for v in node]
    return node


def to_plain(cfg) -> dict[str, Any]:
    """An OmegaConf config resolved into plain containers; an interpolation that fails is one line."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise ConfigError([first_line(exc)]) from None


def _explain_group_error(exc: Exception) -> str:
    """Hydra's first line, with a user file's unknown device named as such."""
    message = first_line(exc)
    match = re.search(r"Could not (?:load|find) '(?:/)?device/([^']+)'", message)
    if match:
        device, allowed = match.group(1), group_options("device")
        return (
            f"cluster: device: unknown device '{device}'{did_you_mean(device, allowed)}; allowed: {', '.join(allowed)}"
        )
    return message


def _split(choices: tuple[str, ...]) -> tuple[tuple[str, ...], list] | None:
    """(structural choices, separable overrides) of a set of choices; None where it must be composed
    whole (fewer than two separable choices, or one group chosen twice)."""
    parsed = parse(choices)
    separable = [
        o for o in parsed
        if o.key_or_group in SEPARABLE_GROUPS and not (o.is_add() or o.is_delete() or o.is_force_add())
    ]  # fmt: skip
    keys = [o.key_or_group for o in separable]
    if len(separable) < 2 or len(set(keys)) < len(keys):
        return None
    return tuple(o.input_line for o in parsed if all(o is not s for s in separable)), separable


def combined_groups(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """The config Hydra composes for these group choices, built from fewer composes.

    Hydra merges each selected option under its own package, in the defaults list's order. With
    each separable choice's node taken from a compose that changes nothing else (`_node`), the full
    config is the structural compose with those nodes (which include whatever the experiment and
    the primary config merge into them after the option). Callers never modify it."""
    split = _split(choices)
    if split is None:
        return compose_groups(choices, dirs)
    structural, separable = split
    combined = dict(compose_groups(structural, dirs))
    for override in separable:
        node = _node(structural, override.key_or_group, override.input_line, dirs)
        if node is None:
            return compose_groups(choices, dirs)
        combined[override.key_or_group] = node
    return combined


@lru_cache(maxsize=16384)
def _node(structural: tuple[str, ...], group: str, line: str, dirs: tuple[Path, ...]) -> dict[str, Any] | None:
    """A separable choice's node composed on top of the structural choices, or None where composing
    it changes more than its own node (then a combination holding it is one whole compose)."""
    base = compose_groups(structural, dirs)
    composed = compose_groups((*structural, line), dirs)
    if group not in composed or not _same_outside(composed, base, group):
        return None
    return composed[group]


def _same_outside(config: dict[str, Any], base: dict[str, Any], group: str) -> bool:
    """Whether two configs agree on every top-level node but `group`'s."""
    return {k: v for k, v in config.items() if k != group} == {k: v for k, v in base.items() if k != group}


def alone(group: str, name: str, dirs: tuple[Path, ...]) -> dict[str, Any]:
    """The config of `group=name` composed alone (unresolved), taken from the compose without
    choices and the option's node where that is what composing it alone gives (a grid without
    structural choices has composed both already). Callers never modify it."""
    line = f"{group}={name}"
    node = _node((), group, line, dirs)
    if node is None:
        return compose_groups((line,), dirs)
    return {**compose_groups((), dirs), group: node}
