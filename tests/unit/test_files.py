"""The one atomic writer and the one read-with-migration path (bench/schema/files.py)."""

from __future__ import annotations

import errno
import json
import os

import pytest
from pydantic import BaseModel

from bench.schema.files import (
    Versioned,
    VersionError,
    atomic_path,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "deep" / "er" / "result.json"
    write_json_atomic(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    write_text_atomic(target, "second")
    write_bytes_atomic(tmp_path / "figure.png", b"\x89PNG")
    assert target.read_text() == "second" and (tmp_path / "figure.png").read_bytes() == b"\x89PNG"
    assert leftovers(target.parent) == [] and leftovers(tmp_path) == []


def test_the_file_and_its_folder_are_synced_before_and_after_the_rename(tmp_path, monkeypatch):
    synced, real_fsync = [], os.fsync

    def fsync(fd):
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "latest"
    write_text_atomic(target, "step-4")
    assert synced == [target.stat().st_ino, tmp_path.stat().st_ino]


def test_a_cache_is_written_atomically_without_syncs_and_with_its_own_permissions(tmp_path, monkeypatch):
    """durable=False (the report's kept rows): replaced whole, nothing fsynced; mode 0o600: this user's alone."""
    synced = []
    monkeypatch.setattr(os, "fsync", synced.append)
    target = tmp_path / "cache" / "rows"
    write_bytes_atomic(target, b"old", durable=False, mode=0o600)
    write_bytes_atomic(target, b"new rows", durable=False, mode=0o600)
    assert target.read_bytes() == b"new rows" and leftovers(target.parent) == []
    assert synced == [] and target.stat().st_mode & 0o777 == 0o600


def test_a_failed_write_keeps_the_old_file_removes_the_temporary_one_and_names_the_target(tmp_path):
    target = tmp_path / "result.json"
    write_text_atomic(target, "old")
    with pytest.raises(OSError) as caught:
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a full disk: write() names no file
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(target))
    with pytest.raises(OSError) as caught:
        with atomic_path(target) as tmp:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp))  # one naming the temporary file
    assert caught.value.filename == str(target)
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_an_unserialisable_document_writes_nothing(tmp_path):
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "x.json", {"a": object()})
    assert list(tmp_path.iterdir()) == []


class Doc(BaseModel):
    schema_version: int
    kind: str
    value: int


def to_v2(doc):
    return {**doc, "schema_version": 2, "value": doc["old_value"] * 10, "old_value": None}


def to_v3(doc):
    return {k: v for k, v in {**doc, "schema_version": 3}.items() if k != "old_value"}


def renamed(doc):
    """A rename within the current version touches only what it finds."""
    return {**doc, "value": doc["value"] + 1} if isinstance(doc.get("value"), int) else doc


KIND = Versioned(
    "thing",
    current=3,
    steps={1: to_v2, 2: to_v3},
    tag=("kind", "thing"),
    unversioned=1,
    renames=(renamed,),
    model=Doc,
)


def test_migration_steps_one_version_at_a_time_then_renames_then_validates():
    assert KIND.parse({"kind": "thing", "old_value": 4}) == Doc(schema_version=3, kind="thing", value=41)
    assert KIND.parse({"kind": "thing", "schema_version": 2, "value": 5, "old_value": 0}).value == 6
    assert KIND.parse({"kind": "thing", "schema_version": 3, "value": 5}).value == 6


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"kind": "thing", "schema_version": 4, "value": 1}, "schema_version 4 is unknown to this fsdp-bench (it "
         "reads versions up to 3); upgrade fsdp-bench to read this thing"),
        ({"kind": "thing", "schema_version": True}, "schema_version True is unknown to this fsdp-bench"),
        ({"kind": "thing", "schema_version": "3"}, "schema_version '3' is unknown to this fsdp-bench"),
        ({"kind": "thing", "schema_version": 0}, "schema_version 0 is unknown to this fsdp-bench"),
        ({"kind": "other"}, "not an fsdp-bench thing (kind must be 'thing')"),
        ([1, 2], "not a thing (expected a JSON object)"),
        ({"kind": "thing", "schema_version": 3, "value": "x"}, "invalid thing (1 problem(s)); first: value: "),
    ],
)  # fmt: skip
def test_what_cannot_be_read_is_said_in_one_line(data, line):
    with pytest.raises(ValueError) as caught:
        KIND.parse(data)
    assert str(caught.value).startswith(line) and "\n" not in str(caught.value)
    assert isinstance(caught.value, VersionError) == ("unknown" in line)


def test_reading_a_file_names_what_is_wrong_with_it(tmp_path):
    path = tmp_path / "thing.json"
    path.write_text('{"kind": "thing", "schema_ver')
    with pytest.raises(ValueError, match="^unreadable JSON: "):
        KIND.read(path)
    with pytest.raises(ValueError, match="^unreadable JSON: "):
        KIND.read(tmp_path / "absent.json")
    write_json_atomic(path, {"kind": "thing", "schema_version": 1, "old_value": 2})
    assert KIND.read(path).value == 21


def test_a_registry_is_consecutive_steps_up_to_the_current_version():
    with pytest.raises(ValueError, match="consecutive"):
        Versioned("gappy", current=3, steps={1: to_v2})
    with pytest.raises(ValueError, match="consecutive"):
        Versioned("ahead", current=2, steps={1: to_v2, 2: to_v3})
    assert Versioned("connection", current=3, steps={2: to_v3}).upgrade({"x": 1}, 2) == {"x": 1, "schema_version": 3}
