"""Schema version 1 -> 2.

Version 1 stored a flat spec that named its model and cluster (`model: "debug"`, `cluster:
"local-cpu"`) with only the fields it overrode (`model_overrides`, `cluster_overrides`); the numbers
behind the names lived in Python tables of the code that wrote it. Version 2 nests the spec like
the config tree and resolves the model's dimensions and the cluster's and device's facts into it.

So the names are resolved against the tables as version 1 had them, frozen in
`v1_registry.json`, never against today's registry (a renamed or re-tuned preset must not change
what an old record says). A name those tables never had (a locally edited package) is rebuilt
from the record's own `model_info`, or a placeholder cluster of the record's device type, and
the record says so in its notes.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

_TRAIN_FIELDS = (
    "seq_len", "micro_batch", "grad_accum", "steps", "warmup_steps", "activation_checkpointing", "compile",
    "compile_backend", "cpu_offload", "seed", "lr", "data", "threads_per_rank",
)  # fmt: skip


@lru_cache(maxsize=1)
def v1_tables() -> dict[str, Any]:
    return json.loads((Path(__file__).with_name("v1_registry.json")).read_text())


def _model(flat: dict[str, Any], model_info: dict[str, Any] | None, notes: dict[str, str]) -> dict[str, Any]:
    name, overrides = flat.get("model"), dict(flat.get("model_overrides") or {})
    preset = v1_tables()["models"].get(name)
    if preset is None:
        info = model_info or {}
        preset = {
            "name": name,
            **{k: info[k] for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size") if k in info},
            "max_seq_len": max(int(flat.get("seq_len") or 1), 1),
            "source": "rebuilt from a version-1 record's model_info",
        }
        notes["model"] = (
            f"model '{name}' was not in version 1's tables: dimensions rebuilt from the record's model_info"
        )
    return {**preset, **overrides, "overrides": overrides}


def _cluster(flat: dict[str, Any], notes: dict[str, str]) -> dict[str, Any]:
    tables = v1_tables()
    name, overrides = flat.get("cluster"), dict(flat.get("cluster_overrides") or {})
    preset = tables["clusters"].get(name)
    if preset is None:
        device_type = flat.get("device_type", "cpu")
        preset = {**tables["clusters"]["local-cpu"], "name": name, "device_type": device_type}
        if device_type == "cuda":
            preset.update(
                device="h100-sxm", source="placeholder: a version-1 cluster name unknown to version 1's tables"
            )
        notes["cluster"] = f"cluster '{name}' was not in version 1's tables: its facts are placeholders"
    device = dict(tables["devices"][preset["device"]])
    cluster = {**{k: v for k, v in preset.items() if k != "device"}, "device": device}
    peaks = dict(cluster.get("peak_tflops") or {})
    for key, value in overrides.items():
        if key == "peak_tflops" and isinstance(value, dict):
            peaks.update({k: v for k, v in value.items() if v is not None})
        elif value is not None:
            cluster[key] = value
    cluster["peak_tflops"] = peaks
    cluster["overrides"] = overrides
    return cluster


def spec_v1_to_v2(flat: dict[str, Any], model_info: dict[str, Any] | None = None, notes: dict | None = None) -> dict:
    """A version-1 spec (or identity: the spec without sweep fields) as a version-2 spec."""
    notes = notes if notes is not None else {}
    return {
        "sweep": {"name": flat.get("sweep", "adhoc"), "point_timeout_s": flat.get("point_timeout_s", 600.0)},
        "repeat": flat.get("repeat", 0),
        "model": _model(flat, model_info, notes),
        "strategy": flat.get("strategy", "full_shard"),
        "precision": flat.get("precision", "fp32"),
        "cluster": _cluster(flat, notes),
        "launcher": flat.get("launcher", "local"),
        "nodes": flat.get("nodes", 1),
        "gpus_per_node": flat.get("gpus_per_node", 1),
        "world_size": flat.get("world_size", 0),
        "train": {k: flat[k] for k in _TRAIN_FIELDS if k in flat},
        "debug": dict(flat.get("debug") or {}),
    }


def record_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    notes = dict(data.get("notes") or {})
    spec = spec_v1_to_v2(dict(data.get("spec") or {}), data.get("model_info"), notes)
    return {**data, "schema_version": 2, "spec": spec, "notes": notes}
