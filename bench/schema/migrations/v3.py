"""Schema version 3 -> 4.

Version 4 adds optional sections a version-3 record reads as absent (null: not measured then):
`metrics.job`, the whole job's accounting (bench/schema/job.py), and `metrics.step_breakdown`, the
profiled steps' split into compute, exposed communication and idle (profile.enabled; a version-3
record was never profiled; its `ops` summary of the profiled operations too),
`metrics.peak_mem_by_category` (profile.memory_categories), and `hang`, a timeout's verdict from the ranks' Flight Recorder dumps
(bench/analysis/hang.py; a version-3 timeout has none). No stored value changes, so the step only moves the version; a point's id
does not depend on the record's version. The step exists so that a reader older than version 4 says
"newer version" of a version-4 record instead of refusing its unknown fields.
"""

from __future__ import annotations

from typing import Any


def record_v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "schema_version": 4}
