"""Baseline files, and loading either side of a check from a baseline file or a results folder.

A baseline is one JSON file (small enough to commit):
    {"schema_version": 1, "kind": "fsdp-bench-baseline", "created_at": ISO-8601, "source": path,
     "env": {fingerprint}, "points": [{"key", "label", "identity", "runs", "counters",
     "samples": {metric: [[per-step values of run 1], ...]}}]}
Only ok points are stored: a baseline says what a good run looks like.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.check.fingerprint import common_fingerprint
from bench.check.points import PointData, identity_key, point_label, points_from_records

BASELINE_SCHEMA_VERSION = 1
BASELINE_KIND = "fsdp-bench-baseline"


class BaselineError(ValueError):
    """An unreadable or invalid baseline/results path (one line, exit 2)."""


@dataclass
class Side:
    """One side of a check: its points, the environment they share, and skipped files."""

    points: list[PointData]
    env: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    source: str = ""
    kind: str = "results"  # "results" (a folder of records) or "baseline" (a saved baseline file)


def build_baseline(side: Side) -> dict[str, Any]:
    """The JSON document of a baseline made from `side`'s ok points."""
    points = [p for p in side.points if p.status == "ok"]
    return {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "kind": BASELINE_KIND,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": side.source,
        "env": side.env,
        "points": [
            {
                "key": p.key,
                "label": p.label,
                "identity": p.identity,
                "runs": p.runs,
                "counters": p.counters,
                "samples": p.samples,
            }
            for p in points
        ],
    }


def save_baseline(side: Side, path: Path) -> dict[str, Any]:
    """Write the baseline atomically (temp file + rename) and return its document."""
    doc = build_baseline(side)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return doc


def parse_baseline(doc: Any, source: str) -> Side:
    """Validate a baseline document and turn it into a Side (BaselineError naming the bad field)."""
    if not isinstance(doc, dict) or doc.get("kind") != BASELINE_KIND:
        raise BaselineError(f"{source}: not an fsdp-bench baseline (kind must be {BASELINE_KIND!r})")
    if doc.get("schema_version") != BASELINE_SCHEMA_VERSION:
        raise BaselineError(
            f"{source}: schema_version {doc.get('schema_version')!r}; this fsdp-bench reads {BASELINE_SCHEMA_VERSION}"
        )
    env = doc.get("env")
    points = []
    for i, item in enumerate(doc.get("points") or []):
        try:
            identity = dict(item["identity"])
            key = identity_key(identity)  # recomputed: a hand-edited identity must not keep a stale key
            samples = {m: [[float(v) for v in run] for run in runs] for m, runs in item.get("samples", {}).items()}
            counters = {m: v for m, v in item.get("counters", {}).items() if isinstance(v, (int, float))}
            points.append(
                PointData(
                    key,
                    point_label(identity, key),
                    identity,
                    "ok",
                    int(item.get("runs", 1)),
                    counters,
                    samples,
                    dict(env or {}),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(f"{source}: points[{i}]: invalid ({type(exc).__name__}: {exc})") from None
    return Side(points, env, source=source, kind="baseline")


def load_side(path: Path) -> Side:
    """A results folder (or one result.json), an fsdp-bench SQLite store, or a saved baseline file, as a Side."""
    from bench.records import load_records
    from bench.store import ResultStore, is_store

    path = Path(path)
    if not path.exists():
        raise BaselineError(f"{path}: no such file or folder")
    if is_store(path):
        return _side_from_records(*ResultStore(path).records(), source=str(path))
    if path.is_file() and path.name != "result.json":
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BaselineError(f"{path}: unreadable JSON: {exc}") from None
        return parse_baseline(doc, str(path))
    return _side_from_records(*load_records(path), source=str(path))


def _side_from_records(records: list, problems: list, *, source: str) -> Side:
    points = points_from_records(records)
    try:
        env = common_fingerprint(points)
    except ValueError as exc:
        raise BaselineError(f"{source}: {exc}") from None
    return Side(points, env, [f"{p.path}: {p.reason}" for p in problems], source)
