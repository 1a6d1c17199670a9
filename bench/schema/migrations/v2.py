"""Schema version 2 -> 3.

Version 3 stores what the ranks derive from a point's measurements once, where the record is made,
instead of leaving each reader to derive it (each reader had its own rule: the report left
zero-duration saves out of the write bandwidth, the console counted them as 0): the aggregate write
bandwidth over the saves, `metrics.checkpoint.write_bytes_per_s` (bench.schema.checkpoint.write_bandwidth:
the median over the saves that took time). Fields version 3 added with a null default (nothing
measured them before) need no step: an older record reads them as null, unknown.

A version-2 record gets the write bandwidth computed by the same rule from its saves' bytes and
durable_s.
"""

from __future__ import annotations

from typing import Any

from bench.schema.checkpoint import write_bandwidth


def record_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    metrics = dict(data.get("metrics") or {})
    checkpoint = metrics.get("checkpoint")
    if isinstance(checkpoint, dict):
        saves = [s for s in checkpoint.get("saves") or [] if isinstance(s, dict)]
        pairs = [(s["bytes"], s["durable_s"]) for s in saves if "bytes" in s and "durable_s" in s]
        metrics["checkpoint"] = {**checkpoint, "write_bytes_per_s": write_bandwidth(pairs)}
    return {**data, "schema_version": 3, "metrics": metrics}
