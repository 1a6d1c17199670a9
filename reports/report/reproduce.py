"""The commands that reproduce a report's points, from the record-derived frame.

Uses the config keys (docs/configuration.md); only values that differ from the config
defaults are spelled out, so a command stays readable.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import numpy as np
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
    command for each of its thousands of configurations). The values are those `to_dict` gives a row."""
    values = {column: _values(rows[column]) for column in RUN_COLUMNS if column in rows.columns}
    columns = [_words(values[column], lambda value, key=key: _quoted(key, value)) for key, column in _ALWAYS]
    columns += [
        _words(values[column], lambda value, key=key, default=default: "" if value == default else _quoted(key, value))
        for key, column, default in _NON_DEFAULT
    ]
    variants = values.get("variant", [None] * len(rows))
    columns.append(_words(variants, lambda value: " ".join(shlex.quote(part) for part in (value or "").split())))
    columns.append(_words(values["sweep"], lambda value: _quoted("sweep.name", value)))
    return ["fsdp-bench run " + " ".join(word for word in words if word) for words in zip(*columns)]


def _values(column: pd.Series) -> list[Any]:
    """A column's values as `to_dict` gives them: `tolist`'s, at a fraction of the cost, for a numpy
    column of numbers (Python numbers) and a text column (Python texts, NaN where missing)."""
    dtype = column.dtype
    if (isinstance(dtype, np.dtype) and dtype.kind in "iufb") or isinstance(dtype, pd.StringDtype):
        return column.tolist()
    return column.to_frame().to_dict("list")[column.name]


def _quoted(key: str, value: Any) -> str:
    return shlex.quote(f"{key}={_value(value)}")


# Kinds whose values are equal only when they are written alike (with None): a column of one of them
# is written once per distinct value. Any other column (floats: 0.0 == -0.0; 1 == 1.0 == True across
# kinds; tuples of those) is written value by value.
_ONCE_KINDS = ({str, type(None)}, {int, type(None)}, {bool, type(None)})


def _words(values: list[Any], write) -> list[str]:
    """`write` of each value, once per distinct value where that is the same text (_ONCE_KINDS)."""
    kinds = set(map(type, values))
    if not any(kinds <= once for once in _ONCE_KINDS):
        return list(map(write, values))
    written: dict[Any, str] = {}
    words = []
    for value in values:
        word = written.get(value)
        if word is None:
            word = written[value] = write(value)
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
