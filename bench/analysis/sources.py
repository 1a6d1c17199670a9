"""Where records come from: a folder of result.json files (any level), one record, or an fsdp-bench
store (bench/analysis/store/: an SQLite file or a postgresql:// URL), told apart by what the path is,
not by its name."""

from __future__ import annotations

from pathlib import Path

from bench.analysis.records import RecordProblem, load_located_records
from bench.analysis.store import is_store, open_existing
from bench.schema.record import RunResult


def load_results(
    results: Path | str,
) -> tuple[list[RunResult], list[RecordProblem], dict[tuple[str, str], Path]]:
    """Records from a store (a file or a URL) or a folder of result.json files (raises ValueError if
    neither: a StoreError is one), and each record's folder by (sweep, point id) where it has one (a
    store has none)."""
    if is_store(results):  # opened only when it holds a store: a foreign SQLite file is left as it is
        return (*open_existing(results).records(), {})
    results = Path(results)
    if not results.exists():
        raise ValueError(f"no such file or folder: {results}")
    if results.is_file() and results.suffix != ".json":
        raise ValueError(f"{results} is neither a results folder, a result.json nor an fsdp-bench store")
    located, problems = load_located_records(results)
    return [r for r, _ in located], problems, {(r.sweep, r.point_id): path.parent for r, path in located}
