"""What a command line may say, read from the registry's folders and the config tree's keys without
composing anything: the groups and their options (the user's folders marked), the experiment
presets with their opening line, the config keys, and the values a key allows.

`--help` lists it (`help_text`) and shell completion offers it (bench/cli/completion.py); completion
runs at each TAB, so nothing here imports Hydra or torch: it lists folders, reads `config.yaml` and
the experiments' first lines, and takes allowed values from the schema's literals.
"""

from __future__ import annotations

import typing
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.config.registry import GROUPS, SHIPPED, is_user_file, option_files

# Every group a command line may choose from: a point's own, and the device a cluster file names.
LISTED_GROUPS = (*GROUPS, "device")
# The primary config's keys that are no config key (Hydra's own node and its defaults list).
NOT_KEYS = ("defaults", "hydra")
DOCS = "docs/configuration.md"


def group_listing(group: str) -> tuple[list[str], list[str]]:
    """(shipped options, the user's options) of a group, each sorted."""
    files = option_files(group)
    return sorted(n for n, p in files.items() if not is_user_file(p)), sorted(
        n for n, p in files.items() if is_user_file(p)
    )


def opening_line(path: Path) -> str:
    """The first comment line of a config file that is not Hydra's `@package` header ("" if none)."""
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text.startswith("#"):
            return ""
        if not text.lstrip("# ").startswith("@package"):
            return text.lstrip("# ").strip()
    return ""


@lru_cache(maxsize=1)
def primary_config() -> dict[str, Any]:
    """The shipped `config.yaml` as plain YAML (its values are the defaults a point starts from)."""
    import yaml

    # libyaml's safe loader where PyYAML was built with it: help and completion read this at each call
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((SHIPPED / "config.yaml").read_text(), Loader=loader) or {}


def sections() -> dict[str, list[str]]:
    """Top-level key -> its keys (empty for a leaf such as `nodes`)."""
    config = {k: v for k, v in primary_config().items() if k not in NOT_KEYS}
    return {key: list(value) if isinstance(value, dict) else [] for key, value in config.items()}


def allowed_values(key: str) -> list[str]:
    """The values a key allows, where they are a closed list: a group's options, a true/false key,
    or a key whose schema field is one of a few literals (`train.checkpoint`: none, sync, async)."""
    if key in LISTED_GROUPS:
        return sorted(option_files(key))
    field = _schema_field(key)
    if field is not None:
        literals = _literals(field.annotation)
        if literals:
            return literals
    default = _default(key)
    return ["true", "false"] if isinstance(default, bool) else []


def _default(key: str) -> Any:
    node: Any = primary_config()
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _schema_field(key: str):
    """The pydantic field a `section.name` key is validated as (None for others)."""
    from bench.schema.options import PreflightSettings, SearchOptions, SweepOptions
    from bench.schema.spec import DebugKnobs, ProfileSpec, TelemetrySpec, TrainSpec

    models = {
        "train": TrainSpec,
        "sweep": SweepOptions,
        "search": SearchOptions,
        "preflight": PreflightSettings,
        "telemetry": TelemetrySpec,
        "profile": ProfileSpec,
        "debug": DebugKnobs,
    }
    section, _, name = key.partition(".")
    model = models.get(section)
    return model.model_fields.get(name) if model is not None else None


def _literals(annotation: Any) -> list[str]:
    """The values of a Literal annotation (inside an Optional too), as an override writes them."""
    if typing.get_origin(annotation) is typing.Literal:
        return [_as_override(v) for v in typing.get_args(annotation)]
    return [v for arg in typing.get_args(annotation) for v in _literals(arg)]


def _as_override(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def group_lines() -> list[str]:
    """One line per group: its options, the user's marked (`(yours: ...)`)."""
    lines = []
    for group in LISTED_GROUPS:
        shipped, yours = group_listing(group)
        mine = f" (yours: {', '.join(yours)})" if yours else ""
        chosen = "  (chosen by the cluster)" if group == "device" else ""
        lines.append(f"  {group}: {', '.join(shipped)}{mine}{chosen}")
    return lines


def help_text() -> str:
    """What `--help` of a command that composes configs adds below its options."""
    experiments = option_files("experiment")
    width = max((len(name) for name in experiments), default=0)
    keys = sections()
    key_line = ", ".join(f"{key}.*" if sub else key for key, sub in keys.items())
    lines = [
        "config groups (GROUP=OPTION; a comma makes a grid: model=tiny,debug):",
        *group_lines(),
        "",
        "experiments (experiment=NAME):",
        *(f"  {name.ljust(width)}  {opening_line(path)}".rstrip() for name, path in sorted(experiments.items())),
        "",
        "keys (KEY=VALUE, e.g. nodes=2 train.seq_len=64; `--cfg job` prints them all with their values):",
        f"  {key_line}",
        f"  every key and its meaning: {DOCS}",
    ]
    return "\n".join(lines)
