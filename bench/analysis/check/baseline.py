"""Baseline files, and loading either side of a check from a baseline file or a results folder.

A baseline is one JSON file (small enough to commit), validated by `BaselineFile`:
    {"schema_version": 2, "kind": "fsdp-bench-baseline", "created_at": ISO-8601, "source": path,
     "env": {fingerprint}, "points": [{"key", "label", "identity", "runs", "counters",
     "step_runs": [[step times of run 1], ...], "tokens_per_step", "mfu_per_token_rate",
     "run_values": {metric: [one value per run]},
     "losses": [loss at each step of the first run] (optional: older files lack it)}]}
Only ok points are stored: a baseline says what a good run looks like. Older versions are
migrated on read through `BASELINE`, the kind's registry (bench/schema/files.py reads every
versioned file): version 1 kept per-metric samples; its step times and the two constants that
turn them into tokens/s and MFU are recovered exactly from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.analysis.check.fingerprint import common_fingerprint
from bench.analysis.check.points import PointData, identity_key, point_label, points_from_records
from bench.schema.files import Versioned, write_text_atomic

BASELINE_SCHEMA_VERSION = 2
BASELINE_KIND = "fsdp-bench-baseline"


class BaselinePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = ""
    label: str = ""
    identity: dict[str, Any]
    runs: int = Field(1, ge=1)
    counters: dict[str, float] = Field(default_factory=dict)
    step_runs: list[list[float]] = Field(default_factory=list)
    tokens_per_step: float | None = None
    mfu_per_token_rate: float | None = None
    run_values: dict[str, list[float]] = Field(default_factory=dict)  # run-level metrics (telemetry)
    losses: list[float] | None = None  # the numerics guard's reference curve; absent in older files


class BaselineFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    kind: str
    created_at: str | None = None
    source: str | None = None
    env: dict[str, Any] | None = None
    points: list[BaselinePoint] = Field(default_factory=list)


def migrate_baseline_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2: per-metric sample lists become the step times and two constants, and each
    point's identity (a version-1 flat spec) becomes the version-2 identity.

    Version 1 stored, per run, step times and tokens/s = tokens per step / step time (and MFU =
    tokens/s x a constant) step by step, so the constants are exact ratios of the first step.
    """
    from bench.analysis.check.points import match_identity
    from bench.schema.migrations import spec_selective_split, spec_v1_to_v2
    from bench.schema.spec import RunSpec

    points = []
    for item in doc.get("points") or []:
        try:
            spec = spec_selective_split(spec_v1_to_v2(item["identity"]))
            item = {**item, "identity": match_identity(RunSpec.model_validate(spec))}
        except (KeyError, TypeError, ValueError):
            pass  # left as it is: validation names the problem
        samples = dict(item.get("samples") or {})
        steps = samples.get("step_time_s") or []
        first_step = steps[0][0] if steps and steps[0] else None
        tps = (samples.get("tokens_per_s") or [[None]])[0][0]
        mfu = (samples.get("mfu") or [[None]])[0][0]
        points.append(
            {
                **{k: v for k, v in item.items() if k != "samples"},
                "step_runs": steps,
                "tokens_per_step": tps * first_step if tps and first_step else None,
                "mfu_per_token_rate": mfu / tps if mfu and tps else None,
            }
        )
    return {**doc, "schema_version": 2, "points": points}


BASELINE = Versioned(
    "baseline",
    current=BASELINE_SCHEMA_VERSION,
    steps={1: migrate_baseline_v1},
    tag=("kind", BASELINE_KIND),
    model=BaselineFile,
)


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
                "step_runs": p.step_runs,
                "tokens_per_step": p.tokens_per_step,
                "mfu_per_token_rate": p.mfu_per_token_rate,
                "run_values": p.run_values,
                "losses": p.loss_runs[0] if p.loss_runs else None,
            }
            for p in points
        ],
    }


def save_baseline(side: Side, path: Path) -> dict[str, Any]:
    """Write the baseline atomically and durably (bench/schema/files.py) and return its document."""
    doc = build_baseline(side)
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return doc


def parse_baseline(doc: Any, source: str) -> Side:
    """Validate (and migrate) a baseline document into a Side; BaselineError naming the bad field."""
    try:
        baseline = BASELINE.parse(doc)
    except ValueError as exc:
        raise BaselineError(f"{source}: {exc}") from None
    return _side_of(baseline, source)


def _side_of(baseline: BaselineFile, source: str) -> Side:
    """The Side of a validated baseline file."""
    env = baseline.env
    points = []
    for item in baseline.points:
        key = identity_key(item.identity)  # recomputed: a hand-edited identity must not keep a stale key
        point = PointData(key, point_label(item.identity, key), item.identity, "ok", item.runs, item.counters)
        point.step_runs, point.fingerprint = item.step_runs, dict(env or {})
        point.tokens_per_step, point.mfu_per_token_rate = item.tokens_per_step, item.mfu_per_token_rate
        point.run_values = {name: list(values) for name, values in item.run_values.items()}
        point.loss_runs = [item.losses] if item.losses else []
        points.append(point)
    return Side(points, env, source=source, kind="baseline")


def read_baseline(path: Path) -> BaselineFile:
    """A baseline file, validated (ValueError with one line). A file of the current version needs
    no migration, so pydantic validates its bytes directly (faster than parsing the JSON into Python
    objects and validating those, and a baseline of thousands of points is megabytes); anything else
    (an older version, another kind, a broken file) is read through `BASELINE`, which migrates it or
    says why not."""
    try:
        baseline = BaselineFile.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return BASELINE.read(path)
    if baseline.kind != BASELINE_KIND or baseline.schema_version != BASELINE_SCHEMA_VERSION:
        return BASELINE.read(path)
    return baseline


def load_side(path: Path | str) -> Side:
    """A results folder (or one result.json), an fsdp-bench store (an SQLite file or a postgresql:// URL),
    or a saved baseline file, as a Side."""
    from bench.analysis.records import load_records
    from bench.analysis.store import StoreError, is_store, open_existing

    if is_store(path):  # opened only when it holds a store: a foreign SQLite file is left as it is
        try:
            store = open_existing(path)
            return _side_from_records(*store.records(), source=store.name)  # a URL's password masked
        except StoreError as exc:
            raise BaselineError(str(exc)) from None
    path = Path(path)
    if not path.exists():
        raise BaselineError(f"{path}: no such file or folder")
    if path.is_file() and path.name != "result.json":
        try:
            baseline = read_baseline(path)
        except ValueError as exc:
            raise BaselineError(f"{path}: {exc}") from None
        return _side_of(baseline, str(path))
    return _side_from_records(*load_records(path), source=str(path))


def _side_from_records(records: list, problems: list, *, source: str) -> Side:
    return side_of_points(points_from_records(records), problems, source=source)


def side_of_points(points: list[PointData], problems: list, *, source: str) -> Side:
    """The Side of a results folder's points (and the problems of its files that could not be read)."""
    try:
        env = common_fingerprint(points)
    except ValueError as exc:
        raise BaselineError(f"{source}: {exc}") from None
    return Side(points, env, [f"{p.path}: {p.reason}" for p in problems], source)


@dataclass
class BaselineDraft:
    """A results folder about to be saved as a baseline: its side, the ok points saved, the others not."""

    side: Side
    source: str

    @property
    def saved(self) -> list[PointData]:
        return [p for p in self.side.points if p.status == "ok"]

    @property
    def not_saved(self) -> list[PointData]:
        return [p for p in self.side.points if p.status != "ok"]

    @property
    def refusal(self) -> str | None:
        """Why this cannot become a baseline (one line naming the input), or None."""
        if self.side.kind == "baseline":
            return f"{self.source}: already a baseline file; give a results folder"
        if not self.saved:
            return f"{self.source}: no ok result records to save"
        return None


def baseline_draft(results: Path | str) -> BaselineDraft:
    """What `fsdp-bench baseline save RESULTS` would save (BaselineError when RESULTS cannot be read)."""
    side = load_side(results)
    return BaselineDraft(side, side.source)
