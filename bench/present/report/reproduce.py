"""The commands that reproduce a report's points, from the record-derived frame.

Uses the config keys (docs/configuration.md); only values that differ from the config
defaults are spelled out, so a command stays readable.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import pandas as pd

# CLI key -> frame column, in the order a person would type them.
_ALWAYS = [
    ("model", "model"),
    ("nodes", "nodes"),
    ("gpus_per_node", "gpus_per_node"),
    ("strategy", "strategy"),
    ("precision", "precision"),
    ("cluster", "cluster"),
    ("launcher", "launcher"),
    ("train.seq_len", "seq_len"),
    ("train.micro_batch", "micro_batch"),
    ("train.grad_accum", "grad_accum"),
    ("train.steps", "steps"),
    ("train.warmup_steps", "warmup_steps"),
]
_NON_DEFAULT = [
    ("train.activation_checkpointing", "activation_checkpointing", "none"),
    ("train.compile", "compile", False),
    ("train.cpu_offload", "cpu_offload", False),
]
MAX_COMMANDS = 20
# The columns run_command reads.
RUN_COLUMNS = [column for _, column in _ALWAYS] + [column for _, column, _ in _NON_DEFAULT] + ["variant", "sweep"]


def run_command(row: Mapping[str, Any]) -> str:
    """`fsdp-bench run ...` for one point (repeat index aside: repeats come from sweep.repeats)."""
    parts = [f"{key}={_value(row[column])}" for key, column in _ALWAYS]
    parts += [f"{key}={_value(row[column])}" for key, column, default in _NON_DEFAULT if row[column] != default]
    parts += (row.get("variant") or "").split()
    parts.append(f"sweep.name={row['sweep']}")
    return "fsdp-bench run " + " ".join(shlex.quote(p) for p in parts)


def run_commands(rows: pd.DataFrame) -> list[str]:
    """run_command of each row of a frame (it reads RUN_COLUMNS; variant may be absent), built a column
    at a time: each column's distinct values written and quoted once (a 10,000-point report writes a
    command for each of its thousands of configurations and each failed point)."""
    columns = [_words(rows[column].tolist(), lambda value, key=key: _quoted(key, value)) for key, column in _ALWAYS]
    columns += [
        _words(
            rows[column].tolist(),
            lambda value, key=key, default=default: "" if value == default else _quoted(key, value),
        )
        for key, column, default in _NON_DEFAULT
    ]
    variants = rows["variant"].tolist() if "variant" in rows else [None] * len(rows)
    columns.append(_words(variants, lambda value: " ".join(shlex.quote(part) for part in (value or "").split())))
    columns.append(_words(rows["sweep"].tolist(), lambda value: _quoted("sweep.name", value)))
    return ["fsdp-bench run " + " ".join(word for word in words if word) for words in zip(*columns)]


_NUMBER_KINDS = {bool, int, float}


def _quoted(key: str, value: Any) -> str:
    return shlex.quote(f"{key}={_value(value)}")


def _words(values: list[Any], write) -> list[str]:
    """`write` of each value, once per distinct value (a value that is no dict key, a NaN among them,
    each time; all of them where numbers of two kinds meet: 1 == 1.0 == True, each written its own way)."""
    if len(set(map(type, values)) & _NUMBER_KINDS) > 1:
        return list(map(write, values))
    written: dict[Any, str] = {}
    words = []
    for value in values:
        try:
            word = written.get(value)
            if word is None:
                word = written[value] = write(value)
        except TypeError:  # unhashable
            word = write(value)
        words.append(word)
    return words


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def default_commands(points: pd.DataFrame) -> list[str]:
    """One run command per distinct configuration (repeats collapse), at most MAX_COMMANDS."""
    configurations = points[RUN_COLUMNS].drop_duplicates()  # repeats share one command
    commands = list(dict.fromkeys(run_commands(configurations)))
    extra = len(commands) - MAX_COMMANDS
    shown = commands[:MAX_COMMANDS]
    if extra > 0:
        shown.append(f"# ... and {extra} more configurations (see results.csv)")
    return shown
