"""`selective` split into `selective_op` and `selective_layer` (within schema version 2).

Records written before the split used `train.activation_checkpointing: selective` for every second
block. Today a user's `selective` means torchtitan's per-op policy, resolved to `selective_op`
when the point is composed, so no record written since stores `selective` (the schema refuses
it): a stored `selective` always has the old meaning and reads back as `selective_layer` with
`ac_every` 2. The point id does not move (`train.activation_checkpointing` declares a legacy name
in bench/schema/spec.py: every second block is `selective` in the identity), so baselines and
resumed sweeps still match these records.
"""

from __future__ import annotations

from typing import Any

from bench.schema.ac_modes import DEFAULT_AC_EVERY, LEGACY_SELECTIVE, SELECTIVE_LAYER


def spec_selective_split(spec: dict[str, Any]) -> dict[str, Any]:
    """A stored spec (version 2 shape) with the old `selective` renamed; other specs unchanged."""
    train = spec.get("train") if isinstance(spec, dict) else None
    if not isinstance(train, dict) or train.get("activation_checkpointing") != LEGACY_SELECTIVE:
        return spec
    renamed = {**train, "activation_checkpointing": SELECTIVE_LAYER, "ac_every": DEFAULT_AC_EVERY}
    return {**spec, "train": renamed}


def record_selective_split(data: dict[str, Any]) -> dict[str, Any]:
    """A version-2 record (or preflight record) whose spec may use the old `selective`."""
    if "spec" not in data:
        return data
    spec = spec_selective_split(data["spec"])
    return data if spec is data["spec"] else {**data, "spec": spec}
