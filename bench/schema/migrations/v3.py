"""Schema version 3 -> 4.

Version 4 adds optional sections a version-3 record reads as absent (null: not measured then):
`metrics.job`, the whole job's accounting (bench/schema/job.py). No stored value changes, so the
step only moves the version; a point's id does not depend on the record's version.
"""

from __future__ import annotations

from typing import Any


def record_v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "schema_version": 4}
