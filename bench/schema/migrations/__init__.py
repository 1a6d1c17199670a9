"""Records last: every stored record, of any schema version, reads as today's RunResult.

A record is migrated on read, one version at a time, by small functions that know only what
their version wrote. The registries of the two record kinds the ranks' side writes are here (the
read path they share is bench/schema/files.py `Versioned`): `RECORD.steps[n]` turns version n
into n + 1; `RECORD.renames` then rewrite values whose meaning moved to a new name within the
current version (the schema refuses the old value, so a stored one is never ambiguous). A record
of a version newer than this code is reported as such, never misread. Preflight records have
their own version (1) and share the renames (they carry a spec).

Modules: v1.py (version 1 -> 2, resolving names against version 1's own tables, v1_registry.json),
v2.py (version 2 -> 3, the derived values version 3 stores), v3.py (version 3 -> 4, optional sections
only: the whole job's accounting and the profiled steps' split), ac_split.py (a stored `selective` ->
`selective_layer`).
"""

from __future__ import annotations

from bench.schema.files import Versioned
from bench.schema.migrations.ac_split import record_selective_split, spec_selective_split
from bench.schema.migrations.v1 import record_v1_to_v2, spec_v1_to_v2
from bench.schema.migrations.v2 import record_v2_to_v3
from bench.schema.migrations.v3 import record_v3_to_v4
from bench.schema.preflight import PREFLIGHT_KIND, PREFLIGHT_SCHEMA_VERSION, PreflightResult
from bench.schema.record import SCHEMA_VERSION, RunResult

# A record naming no version is read as version 1 (what the first code wrote).
RECORD = Versioned(
    "record",
    current=SCHEMA_VERSION,
    steps={1: record_v1_to_v2, 2: record_v2_to_v3, 3: record_v3_to_v4},
    unversioned=1,
    renames=(record_selective_split,),
    model=RunResult,
)
PREFLIGHT = Versioned(
    "preflight record",
    current=PREFLIGHT_SCHEMA_VERSION,
    tag=("kind", PREFLIGHT_KIND),
    renames=(record_selective_split,),
    model=PreflightResult,
)

__all__ = ["PREFLIGHT", "RECORD", "spec_selective_split", "spec_v1_to_v2"]
