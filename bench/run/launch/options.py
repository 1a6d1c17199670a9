"""Typed launcher options: the `launcher` config group's fields, checked before anything launches.

Each cluster launcher declares its fields as a pydantic model derived from `LauncherOptions`
(defaults mirror sweeps/launcher/<name>.yaml) and derives from `ConfiguredLauncher`;
`parse_options` rejects unknown fields and wrong types with the one-line `launcher.<field>: ...`
errors the CLI prints with exit 2 (the same validation style as the spec, bench/schema/spec.py).
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.run.launch.base import Launcher


class LauncherOptions(BaseModel):
    """Strict: YAML's `true` is no string and `"8"` no integer; `600` is a valid number of seconds."""

    model_config = ConfigDict(extra="forbid", strict=True)


T = TypeVar("T", bound=LauncherOptions)


class ConfiguredLauncher(Launcher):
    """A launcher whose `launcher` group fields are checked into `self.opts` (an `options_class`)."""

    options_class: type[LauncherOptions]

    def __init__(self, options: dict | None = None) -> None:
        super().__init__(options)
        self.opts = parse_options(self.options_class, self.options, self.name)


def parse_options(cls: type[T], options: dict | None, launcher: str) -> T:
    """Build `cls` from the config group's fields (`name` aside); raise ConfigError on bad input."""
    from bench.config.problems import ConfigError, describe_validation_error, did_you_mean

    values = {k: v for k, v in (options or {}).items() if k != "name"}
    allowed = list(cls.model_fields)
    unknown = [
        f"launcher.{key}: unknown field for launcher={launcher}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"
        for key in values
        if key not in cls.model_fields
    ]
    if unknown:
        raise ConfigError(unknown)
    try:
        return cls.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "launcher.")) from None
