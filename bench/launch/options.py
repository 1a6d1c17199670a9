"""Typed launcher options: the `launcher` config group's fields, checked before anything launches.

Each cluster launcher declares its fields as a dataclass (defaults mirror
sweeps/launcher/<name>.yaml) and derives from `ConfiguredLauncher`; `parse_options` rejects
unknown fields and wrong types with the one-line `launcher.<field>: ...` errors the CLI prints
with exit 2.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from bench.launch.base import Launcher

T = TypeVar("T")


class ConfiguredLauncher(Launcher):
    """A launcher whose `launcher` group fields are checked into `self.opts` (an `options_class`)."""

    options_class: type

    def __init__(self, options: dict | None = None) -> None:
        super().__init__(options)
        self.opts = parse_options(self.options_class, self.options, self.name)


def parse_options(cls: type[T], options: dict | None, launcher: str) -> T:
    """Build `cls` from the config group's fields (`name` aside); raise ConfigError on bad input."""
    from bench.config import ConfigError

    values = {k: v for k, v in (options or {}).items() if k != "name"}
    hints = typing.get_type_hints(cls)
    allowed = [f.name for f in dataclasses.fields(cls)]
    problems = [
        f"launcher.{key}: unknown field for launcher={launcher}; allowed: {', '.join(allowed)}"
        for key in values
        if key not in hints
    ]
    for key, value in values.items():
        if key in hints and not _matches(value, hints[key]):
            problems.append(f"launcher.{key}: expected {_describe(hints[key])}, got {value!r}")
    if problems:
        raise ConfigError(problems)
    return cls(**values)


def _matches(value: Any, hint: Any) -> bool:
    """Whether a YAML-shaped value fits a simple annotation (str, int, float, bool, list, dict, unions)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    if origin is not None:
        return isinstance(value, origin)
    if hint is float:  # YAML writes 600 for 600.0
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint) or hint
    return {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list"}.get(
        origin, "a mapping" if origin is dict else getattr(origin, "__name__", str(origin))
    )
