"""Records last: every stored record, of any schema version, reads as today's RunResult.

A record is migrated on read, one version at a time, by small functions that know only what
their version wrote (`migrate(data)` applies them in turn). A record of a version newer than this
code is reported as such, never misread. `RECORD_MIGRATIONS[n]` turns version n into n + 1;
`RECORD_RENAMES` then rewrite values whose meaning moved to a new name within the current version
(the schema refuses the old value, so a stored one is never ambiguous).

Modules: v1.py (version 1 -> 2, resolving names against version 1's own tables, v1_registry.json),
ac_split.py (a stored `selective` -> `selective_layer`).
"""

from __future__ import annotations

from typing import Any

from bench.schema.migrations.ac_split import record_selective_split, spec_selective_split
from bench.schema.migrations.v1 import record_v1_to_v2, spec_v1_to_v2

RECORD_MIGRATIONS = {1: record_v1_to_v2}
RECORD_RENAMES = (record_selective_split,)


class FutureVersionError(ValueError):
    """A record written by a newer fsdp-bench."""


def migrate_record(data: dict[str, Any], current: int) -> dict[str, Any]:
    """The record as version `current` (a dict, not yet validated)."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > current:
        raise FutureVersionError(
            f"schema_version {version!r} is unknown to this fsdp-bench (it reads versions up to {current}); "
            "upgrade fsdp-bench to read this record"
        )
    while version < current:
        data = RECORD_MIGRATIONS[version](data)
        version = data["schema_version"]
    for rename in RECORD_RENAMES:
        data = rename(data)
    return data


__all__ = [
    "FutureVersionError",
    "RECORD_MIGRATIONS",
    "RECORD_RENAMES",
    "migrate_record",
    "spec_selective_split",
    "spec_v1_to_v2",
]
