"""files_named lists a results tree in exactly the order sorted(rglob) does, faster (bench/analysis/records.py)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.analysis.records import RESULT_FILE, file_texts_named, files_named


def _tree(root: Path) -> None:
    # Names whose text order differs from their parts' order ("a-b" < "a/b" as text, not as parts),
    # nesting at several depths, other files beside, and a symlinked folder, which rglob does not enter.
    for folder in ["a", "a-b", "a/b", "a/b/c", "a.b", "z", "A", "sweep/0001", "sweep/0002/deep"]:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / RESULT_FILE).write_text("{}")
        (root / folder / "telemetry.jsonl").write_text("")
    (root / "empty").mkdir()
    os.symlink(root / "a", root / "link", target_is_directory=True)


def test_same_paths_in_the_same_order_as_sorted_rglob(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = files_named(tmp_path, RESULT_FILE)
    assert found == sorted(tmp_path.rglob(RESULT_FILE))
    assert file_texts_named(tmp_path, RESULT_FILE) == [str(p) for p in found]  # check's worker sends these
    assert [str(p.relative_to(tmp_path).parent) for p in found] == [
        "A",
        "a/b/c",
        "a/b",
        "a",
        "a-b",
        "a.b",
        "sweep/0001",
        "sweep/0002/deep",
        "z",
    ]  # fmt: skip: parts compare with the file's name too ("c" < "result.json")


def test_a_relative_root_gives_what_rglob_gives(tmp_path: Path, monkeypatch) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert files_named(Path("."), RESULT_FILE) == sorted(Path(".").rglob(RESULT_FILE))
    assert files_named(Path("sweep"), RESULT_FILE) == [
        Path("sweep/0001/result.json"),
        Path("sweep/0002/deep/result.json"),
    ]
