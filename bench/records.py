"""Read result records from a results folder: the JSON files are the source of truth.

A truncated or invalid file is reported as a problem, never raised: one bad point must not
hide the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from bench.schemas import RunResult

from fsdp_core.protocol import RESULT_FILE  # noqa: F401 - re-exported: readers of results folders use it


@dataclass(frozen=True)
class RecordProblem:
    path: Path
    reason: str


def read_record(path: Path) -> RunResult:
    """Parse and validate one result.json (raises ValueError with a one-line reason)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable JSON: {exc}") from None
    if isinstance(data, dict) and data.get("schema_version") not in (None, 1):
        raise ValueError(f"unknown schema_version {data.get('schema_version')!r} (this fsdp-bench reads 1)")
    try:
        return RunResult.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"invalid record ({exc.error_count()} problem(s)); first: {loc}: {first['msg']}") from None


def load_records(root: Path) -> tuple[list[RunResult], list[RecordProblem]]:
    """Every valid record under `root` (a folder of sweeps, one sweep, or one result.json)."""
    root = Path(root)
    paths = [root] if root.is_file() else sorted(root.rglob(RESULT_FILE))
    records, problems = [], []
    for path in paths:
        try:
            records.append(read_record(path))
        except ValueError as exc:
            problems.append(RecordProblem(path, str(exc)))
    return records, problems


def write_record(record: RunResult, path: Path) -> None:
    """Write a record atomically (temp file + rename): readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(record.model_dump_json(indent=2))
    tmp.replace(path)
