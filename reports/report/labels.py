"""Human-readable names for configurations and scaling series (legends, table cells).

A label names only what varies across the report: when every point is bf16, "bf16" is noise.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pandas as pd

from bench.analysis.report.aggregate import GROUP_KEYS


def value_text(key: str, value: Any) -> str:
    """One configuration value as a short token ("AC full", "compile", "seq 2048")."""
    formats = {
        "activation_checkpointing": lambda v: f"AC {v}",
        "compile": lambda v: "compiled" if v else "eager",
        "cpu_offload": lambda v: "CPU offload" if v else "no offload",
        "seq_len": lambda v: f"seq {int(v)}",
        "gpus_per_node": lambda v: f"{int(v)}/node",
        "variant": lambda v: v or "default",
    }
    return formats.get(key, str)(value)


def batch_text(row: Mapping[str, Any], mode: str = "weak") -> str:
    """The batch of a configuration: per device for weak scaling, global for strong."""
    if mode == "strong":
        return f"global batch {int(row['global_batch'])}"
    micro, accum = int(row["micro_batch"]), int(row["grad_accum"])
    return f"batch {micro}/dev" if accum == 1 else f"batch {micro}x{accum}/dev"


def config_label(row: Mapping[str, Any]) -> str:
    """A full configuration name for tables: strategy, precision, batch, then non-defaults."""
    parts = [str(row["strategy"]), str(row["precision"]), batch_text(row), value_text("seq_len", row["seq_len"])]
    if row.get("activation_checkpointing", "none") != "none":
        parts.append(value_text("activation_checkpointing", row["activation_checkpointing"]))
    if row.get("compile"):
        parts.append("compiled")
    if row.get("cpu_offload"):
        parts.append("CPU offload")
    if row.get("variant"):
        parts.append(str(row["variant"]))
    return " · ".join(parts)


# The columns config_label reads: a label is computed once per distinct combination of them.
CONFIG_COLUMNS = ("strategy", "precision", "micro_batch", "grad_accum", "seq_len", "activation_checkpointing",
                  "compile", "cpu_offload", "variant")  # fmt: skip


def config_labels(frame: pd.DataFrame) -> list[str]:
    """config_label of every row, in order: the same strings, each computed once per distinct
    configuration (10,000 points have a few hundred) instead of once per row."""
    present = [c for c in CONFIG_COLUMNS if c in frame.columns]
    labels: dict[tuple, str] = {}
    out = []
    for key in zip(*(frame[c].tolist() for c in present)):
        label = labels.get(key)
        if label is None:
            label = labels[key] = config_label(dict(zip(present, key)))
        out.append(label)
    return out


def series_labels(
    scaling: pd.DataFrame, omit: tuple[str, ...] = ("model",), only: Collection | None = None
) -> dict[int, str]:
    """series id -> legend label, from the group keys that differ between series.

    `omit` drops keys the plot already shows (plots facet by model). The batch and the
    scaling mode are always named, since the efficiency means something different in each.
    `only`: label just these series (what varies is still judged over all of them).
    """
    if scaling.empty:
        return {}
    read = [c for c in dict.fromkeys([*GROUP_KEYS, "series", "mode", "micro_batch", "grad_accum", "global_batch"])
            if c in scaling.columns]  # fmt: skip
    firsts = scaling[read].drop_duplicates("series")  # only the columns a label reads: a few, not a hundred
    varying = [k for k in GROUP_KEYS if k not in omit and firsts[k].nunique(dropna=False) > 1]
    if not varying:
        varying = ["strategy"]
    if only is not None:
        firsts = firsts[firsts["series"].isin(list(only))]
    labels = {}
    for values in zip(*(firsts[c].tolist() for c in read)):  # Python scalars, as iterrows gives them
        row = dict(zip(read, values))
        parts = [value_text(k, row[k]) for k in varying]
        mode = row["mode"]
        suffix = "" if mode == "single" else f" ({mode})"
        labels[int(row["series"])] = " · ".join([*parts, batch_text(row, mode)]) + suffix
    return labels
