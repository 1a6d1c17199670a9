"""The one short name of a point, for tables and progress lines: what usually varies in a grid."""

from __future__ import annotations

from typing import Any


def point_label(spec: Any) -> str:
    """`debug 2x1 full_shard bf16 mb=2 s=64` (+ ` ac=full`, ` ga=2` when set), from a RunSpec or its JSON."""
    data = spec if isinstance(spec, dict) else spec.model_dump(mode="json")
    model = data["model"]["name"] if isinstance(data["model"], dict) else data["model"]
    train = data.get("train") or {}
    label = (
        f"{model} {data['nodes']}x{data['gpus_per_node']} {data['strategy']} {data['precision']} "
        f"mb={train.get('micro_batch')} s={train.get('seq_len')}"
    )
    if train.get("activation_checkpointing", "none") != "none":
        label += f" ac={train['activation_checkpointing']}"
    if train.get("grad_accum", 1) > 1:
        label += f" ga={train['grad_accum']}"
    return label


def configuration_label(spec: Any) -> str:
    """The axes `plan --best` searches, from a RunSpec or its JSON: `full_shard bf16 mb=2 ga=1 ac=full`
    (+ ` compile`)."""
    data = spec if isinstance(spec, dict) else spec.model_dump(mode="json", include={"strategy", "precision", "train"})
    train = data["train"]
    label = (
        f"{data['strategy']} {data['precision']} mb={train['micro_batch']} ga={train['grad_accum']} "
        f"ac={train['activation_checkpointing']}"
    )
    return label + (" compile" if train.get("compile") else "")
