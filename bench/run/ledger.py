"""The sweep ledger: which points still need to run, decided from the records on disk.

The result.json files are the source of truth (they survive a killed parent, travel with
the results folder and are written atomically), so an interrupted sweep resumes by reading
them. Every decision is also appended to `<sweep>/ledger.jsonl`, a human-readable history.

A point's record is found at `<sweep>/<point_id>/result.json`, or, for a record an older schema
version wrote under the id that version computed, by the point's identity: after an upgrade the
same sweep still resumes instead of measuring its points again.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from bench.analysis.records import RESULT_FILE, read_record
from bench.schema.files import writing
from bench.schema.record import RunResult
from bench.schema.spec import RunSpec

RETRYABLE = ("failed", "timeout", "oom")

# Every decision of a sweep, one JSON line each, in its sweep folder.
LEDGER_FILE = "ledger.jsonl"


@dataclass(frozen=True)
class Decision:
    spec: RunSpec
    run: bool
    reason: str
    previous: RunResult | None = None


class Ledger:
    def __init__(self, results_dir: Path, sweep: str, force: bool = False, retry_failed: bool = False) -> None:
        self.sweep_dir = Path(results_dir) / sweep
        self.force, self.retry_failed = force, retry_failed
        self._older: dict[str, Path] | None = None

    def decide(self, spec: RunSpec) -> Decision:
        """Run or skip a point, and why (an unreadable record is reported and rerun, never a crash)."""
        path = self.sweep_dir / spec.point_id / RESULT_FILE
        if not path.exists():
            path = self._older_records().get(spec.point_id, path)
        if not path.exists():
            return Decision(spec, True, "new")
        try:
            previous = read_record(path)
        except ValueError as exc:
            return Decision(spec, True, f"rerun: unreadable record ({exc})")
        if self.force:
            return Decision(spec, True, "rerun: sweep.force=true", previous)
        if previous.status == "ok":
            return Decision(spec, False, "done: ok result exists", previous)
        if previous.status in RETRYABLE:
            if self.retry_failed:
                return Decision(spec, True, f"rerun: {previous.status} and sweep.retry_failed=true", previous)
            return Decision(spec, False, f"kept: {previous.status} (sweep.retry_failed=true reruns it)", previous)
        return Decision(spec, True, f"rerun: previous status {previous.status}", previous)

    def _older_records(self) -> dict[str, Path]:
        """Records stored under another id than their spec's today (older schema versions), by today's id."""
        if self._older is None:
            self._older = {}
            for path in sorted(self.sweep_dir.glob(f"*/{RESULT_FILE}")):
                try:
                    point_id = read_record(path).spec.point_id
                except ValueError:
                    continue
                if point_id != path.parent.name:
                    self._older.setdefault(point_id, path)
        return self._older

    def log(self, event: str, point_id: str, **fields: object) -> None:
        """Append one event line to the sweep's history."""
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        entry = {
            "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "event": event,
            "point_id": point_id,
            **fields,
        }
        path = self.sweep_dir / LEDGER_FILE
        with writing(path), open(path, "a") as handle:
            handle.write(json.dumps(entry) + "\n")
