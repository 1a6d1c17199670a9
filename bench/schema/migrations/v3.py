"""Schema version 3 -> 4.

Version 4 adds `metrics.step_breakdown`, the profiled steps' split into compute, exposed
communication and idle (profile.enabled). A version-3 record was never profiled: it reads the
section as null, unknown, and nothing else changes. The step exists so that a reader older than
version 4 says "newer version" of a version-4 record instead of refusing its unknown field.
"""

from __future__ import annotations

from typing import Any


def record_v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "schema_version": 4}
