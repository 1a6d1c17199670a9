"""Hydra's composes of config-group choices (`model=`, `strategy=`, `experiment=`, ...): the expensive
part of composing a point, done as few times as a grid allows, with the result Hydra gives.

`compose_groups` is the one Hydra compose (cached per set of choices). `combined_groups` gives the
config of a set of choices from fewer of them: a grid's points differ in a few *separable* choices
(`model=`, `strategy=`, `precision=`, `cluster=`, `launcher=`), and a separable choice whose compose
on top of the other, *structural* choices (the experiment, Hydra's own, `+`/`~` group overrides)
changes nothing but its own node is taken from there. So 4 models x 5 strategies x 3 precisions cost
1 + 4 + 5 + 3 composes, not 60. A choice that writes outside its node (a `# @package _global_`
option) makes the combination one whole Hydra compose.

`prime` goes further for a grid whose choices are known up front: a *leaf* option (a file with no
defaults list and no `@package` header) puts its content into its own node and nowhere else, so one
Hydra compose may choose a leaf option of each of several groups at once and gives each group's
node as composing that option alone gives it, as long as each default it replaces is a leaf too
(nothing else loses what the default wrote). The same grid then costs 1 + 5 composes (the most
options of one group). Each such compose is checked: every node outside the chosen groups must equal
the structural compose's, else its options are composed alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from bench.config.problems import ConfigError, first_line
from bench.config.registry import GROUPS, group_options, option_files

# Groups whose choice can be composed apart from the others and combined (`combined_groups`);
# an experiment (which may set anything and override other groups' choices) is always composed whole.
SEPARABLE_GROUPS = ("model", "strategy", "precision", "cluster", "launcher")
# Presets the validation compares a point's node with (`alone`): composed alone, so `prime` adds
# their options to the batches without structural choices.
PRESET_GROUPS = ("model", "cluster")


class Composition(NamedTuple):
    """One Hydra compose: the config as plain containers (interpolations unresolved, without Hydra's
    own node) and the option Hydra chose for each group (`hydra.runtime.choices`)."""

    config: dict[str, Any]
    choices: dict[str, Any]


@lru_cache(maxsize=1)
def parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@lru_cache(maxsize=65536)
def parse_one(override: str):
    """One override parsed by Hydra's grammar (cached: a grid repeats the same strings across its
    points, and the parser costs about a millisecond each). Callers only read the result."""
    try:
        return parser().parse_overrides([override])[0]
    except Exception as exc:  # Hydra's grammar errors: one line
        raise ConfigError([first_line(exc)]) from None


def parse(overrides: Sequence[str]) -> list:
    return [parse_one(item) for item in overrides]


@lru_cache(maxsize=512)
def compose_groups(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> Composition:
    """Hydra's compose of the group choices alone; cached. Callers never modify it.

    Composed without Hydra's own node (`_compose_app`) where that gives Hydra's result, else (and
    for every error, so that it is Hydra's own) with Hydra's API."""
    parsed = parse(choices)
    if not any(o.key_or_group.startswith("hydra") or o.is_sweep_override() for o in parsed):
        try:
            composed, hydra_node = _compose_app(choices, dirs)
            if not choices or hydra_node == _compose_app((), dirs)[1]:
                return composed
        except Exception:  # anything: Hydra's own compose below says what is wrong, as Hydra says it
            pass
    return _compose_with_hydra(choices, dirs)


def _compose_with_hydra(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> Composition:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    searchpath = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs[1:])}]"] if len(dirs) > 1 else []
    try:
        with initialize_config_dir(config_dir=str(dirs[0]), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=[*choices, *searchpath], return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        # ValueError: Hydra's own complaint about malformed overrides such as `experiment=null`.
        raise ConfigError([_explain_group_error(exc)]) from None
    chosen = OmegaConf.to_container(cfg.hydra.runtime.choices, resolve=False)
    with open_dict(cfg):
        del cfg["hydra"]
    return Composition(OmegaConf.to_container(cfg, resolve=False), chosen)  # type: ignore[arg-type]


@lru_cache(maxsize=512)
def _compose_app(choices: tuple[str, ...], dirs: tuple[Path, ...]) -> tuple[Composition, Any]:
    """The compose Hydra's API makes, less Hydra's own node: its defaults list without Hydra's
    configs (more than half the files a compose reads), merged by Hydra's own loader, through one
    loader for all composes. Also returns the `hydra` node it composed: where anything but the
    primary config wrote into it, Hydra would check that against its schema, so `compose_groups`
    asks Hydra. Raises on anything Hydra's API would also apply (overrides of values, which group
    choices never are)."""
    from hydra._internal.config_repository import CachingConfigRepository
    from hydra._internal.defaults_list import create_defaults_list
    from omegaconf import OmegaConf

    loader = _loader(dirs)
    repo = CachingConfigRepository(loader.repository)
    defaults = create_defaults_list(
        repo=repo, config_name="config", overrides_list=parse(choices), prepend_hydra=False, skip_missing=False
    )
    if defaults.config_overrides:
        raise ValueError("value overrides are applied by Hydra's API")
    cfg = loader._compose_config_from_defaults_list(defaults=defaults.defaults, repo=repo)
    config = OmegaConf.to_container(cfg, resolve=False)
    hydra_node = config.pop("hydra", None)  # type: ignore[union-attr]
    return Composition(config, dict(defaults.overrides.known_choices)), hydra_node  # type: ignore[arg-type]


@lru_cache(maxsize=8)
def _loader(dirs: tuple[Path, ...]):
    """Hydra's config loader over the shipped tree and the user's folders, searched as
    `initialize_config_dir` plus `hydra.searchpath` search them (the schema source last)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    search_path = create_config_search_path(str(dirs[0]))
    for extra in dirs[1:]:
        search_path.append(provider="hydra.searchpath in command-line", path=f"file://{extra}")
    search_path.append(provider="schema", path="structured://")
    return ConfigLoaderImpl(config_search_path=search_path)


def copy_tree(node: Any) -> Any:
    """A deep copy of plain dicts and lists (copy.deepcopy's generality costs 10x)."""
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
        return f"cluster: device: unknown device '{match.group(1)}'; allowed: {', '.join(group_options('device'))}"
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
    """The config Hydra composes for these group choices, built from fewer Hydra composes.

    Hydra merges each selected option under its own package, in the defaults list's order. With
    each separable choice's node taken from a compose that changes nothing else (`_node`), the full
    config is the structural compose with those nodes (which include whatever the experiment and
    the primary config merge into them after the option). Callers never modify it."""
    split = _split(choices)
    if split is None:
        return compose_groups(choices, dirs).config
    structural, separable = split
    combined = dict(compose_groups(structural, dirs).config)
    for override in separable:
        node = _node(structural, override.key_or_group, override.input_line, dirs)
        if node is None:
            return compose_groups(choices, dirs).config
        combined[override.key_or_group] = node
    return combined


# (structural choices, a separable choice, dirs) -> the choice's node, or None where its compose
# changes more than its node (then a combination holding it is one whole compose).
_NODES: dict[tuple[tuple[str, ...], str, tuple[Path, ...]], dict[str, Any] | None] = {}
_NODES_LIMIT = 16384


def _remember(key: tuple[tuple[str, ...], str, tuple[Path, ...]], node: dict[str, Any] | None) -> None:
    if len(_NODES) >= _NODES_LIMIT:  # bounded like the compose cache it is taken from
        _NODES.clear()
    _NODES[key] = node


def _node(structural: tuple[str, ...], group: str, line: str, dirs: tuple[Path, ...]) -> dict[str, Any] | None:
    """A separable choice's node on top of the structural choices (a batch's, where `prime` composed
    one), or None where composing it changes more than its own node."""
    key = (structural, line, dirs)
    if key not in _NODES:
        base = compose_groups(structural, dirs).config
        alone = compose_groups((*structural, line), dirs).config
        _remember(key, alone.get(group) if _same_outside(alone, base, {group}) and group in alone else None)
    return _NODES[key]


def _same_outside(config: dict[str, Any], base: dict[str, Any], groups: set[str]) -> bool:
    """Whether two configs agree on every top-level node but those of `groups`."""
    return {k: v for k, v in config.items() if k not in groups} == {k: v for k, v in base.items() if k not in groups}


def alone(group: str, name: str, dirs: tuple[Path, ...]) -> dict[str, Any]:
    """The config of `group=name` composed alone (unresolved; from a batch where `prime` composed
    one: the compose without choices, with the option's node). Callers never modify it."""
    line = f"{group}={name}"
    node = _NODES.get(((), line, dirs))
    if node is None:
        return compose_groups((line,), dirs).config
    return {**compose_groups((), dirs).config, group: node}


def prime(choice_sets: Iterable[tuple[str, ...]], dirs: tuple[Path, ...]) -> None:
    """Compose the leaf options of a grid's group combinations in batches (the module docstring), so
    that `combined_groups` and `alone` find their nodes composed; what no batch covers is composed
    alone when asked for, as before."""
    wanted: dict[tuple[str, ...], dict[str, dict[str, None]]] = {}
    for choices in dict.fromkeys(choice_sets):
        split = _split(choices)
        if split is None:
            continue
        structural, separable = split
        for override in separable:
            group, line = override.key_or_group, override.input_line
            requests = [structural, ()] if group in PRESET_GROUPS and structural else [structural]
            for at in requests:
                if (at, line, dirs) not in _NODES and _is_leaf(group, override.value(), dirs):
                    wanted.setdefault(at, {}).setdefault(group, {})[line] = None
    for structural, options in wanted.items():
        counts = [len(lines) for lines in options.values()]
        if sum(counts) <= max(counts) + 1:
            continue  # the batches and the structural compose would cost as many composes
        try:
            _compose_batches(structural, {group: list(lines) for group, lines in options.items()}, dirs)
        except ConfigError:
            continue  # Hydra refused: each point composed alone says why


def _compose_batches(structural: tuple[str, ...], options: dict[str, list[str]], dirs: tuple[Path, ...]) -> None:
    """The k-th batch chooses the k-th leaf option of each group whose structural choice is a leaf too."""
    base = compose_groups(structural, dirs)
    options = {g: lines for g, lines in options.items() if _replaces_leaf(base, g, dirs)}
    for k in range(max(map(len, options.values()), default=0)):
        batch = {group: lines[k] for group, lines in options.items() if k < len(lines)}
        composed = compose_groups((*structural, *batch.values()), dirs).config
        if not _same_outside(composed, base.config, set(batch)):
            continue  # not what the argument promises: these options are composed alone when asked for
        for group, line in batch.items():
            _remember((structural, line, dirs), composed.get(group))


def _replaces_leaf(base: Composition, group: str, dirs: tuple[Path, ...]) -> bool:
    """Whether the option the structural compose chose for `group` (if any) is a leaf: replacing it
    then changes nothing outside the group's node."""
    chosen = base.choices.get(group)
    return chosen is None or _is_leaf(group, chosen, dirs)


@lru_cache(maxsize=1024)
def _is_leaf(group: str, option: Any, dirs: tuple[Path, ...]) -> bool:
    """Whether an option file holds only its own node's content: a mapping without a defaults list,
    and no line that could be a Hydra header (`# @package ...`), read conservatively."""
    import yaml

    path = option_files(group, dirs).get(str(option)) if group in GROUPS else None
    if path is None:
        return False
    text = path.read_text()
    if re.search(r"^\s*#\s*@", text, re.MULTILINE):
        return False
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and bool(data) and "defaults" not in data
