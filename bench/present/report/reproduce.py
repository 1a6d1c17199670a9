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


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def default_commands(points: pd.DataFrame) -> list[str]:
    """One run command per distinct configuration (repeats collapse), at most MAX_COMMANDS."""
    configurations = points[RUN_COLUMNS].drop_duplicates()  # repeats share one command
    commands = list(dict.fromkeys(run_command(row) for row in configurations.to_dict("records")))
    extra = len(commands) - MAX_COMMANDS
    shown = commands[:MAX_COMMANDS]
    if extra > 0:
        shown.append(f"# ... and {extra} more configurations (see results.csv)")
    return shown
