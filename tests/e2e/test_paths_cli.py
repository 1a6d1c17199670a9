"""Every path a user gives, refused before anything launches or is written (bench/config/paths.py):
one line naming the key and exit 2 for a path that is missing, of the wrong kind or not writable by
this user; exit 1 with the storage line (bench/run/ownership/storage.py) for a disk that is full or
read-only.

In-process calls of `bench.cli.main.main`, the console script's own code: nothing here may launch,
so nothing here is slow. Each case asserts the exact line and that nothing was written where the
command writes (no launch folder, no output).

Tests run as root in CI, where chmod does not stop a write. So "unwritable by this user" is the
file-in-the-way case as root (a path under a plain file: no user can create it), and a 0o500
folder besides when not root. A read-only disk is a real read-only tmpfs (root only): it is a
storage fault, exit 1, not an input error.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from bench_cli import in_process
from disks import fill, remount_read_only, small_tmpfs

from bench.analysis.records import write_record
from bench.analysis.store import SQLiteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, nights  # noqa: E402

ROOT = os.geteuid() == 0
POINT = ["model=debug", "train.steps=2", "train.warmup_steps=1", "train.seq_len=32"]


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A results folder with one record, an empty store, a plain file, and a clean config search path."""
    monkeypatch.delenv("FSDP_BENCH_CONFIG_DIR", raising=False)
    monkeypatch.setenv("FSDP_BENCH_CALIBRATION", str(tmp_path / "calibration.json"))
    results = tmp_path / "results"
    write_record(make_record(), results / "unit" / "p" / "result.json")
    SQLiteStore(tmp_path / "store.sqlite")
    (tmp_path / "plain").write_text("not a folder")
    return tmp_path


def call(argv: list[object]) -> tuple[int, str]:
    """(exit code, stderr) of `fsdp-bench ARGV` run in this process."""
    run = in_process(*argv)
    return run.rc, run.stderr


def files(root: Path) -> dict[str, int]:
    """Every file and folder under `root` with its size: a refused command leaves this as it was."""
    return {str(p): p.stat().st_size if p.is_file() else -1 for p in root.rglob("*")}


# id -> (key, command line with {path} for the path under test): paths a command writes, by what they must be.
CHECK = ["check", "{tmp}/results", "--baseline", "{tmp}/results"]
OUTPUT_FOLDER_CASES = {
    "run results_dir": ("results_dir", ["run", *POINT, "results_dir={path}"]),
    "sweep results_dir": ("results_dir", ["sweep", "experiment=cpu_smoke", "nodes=1", "results_dir={path}"]),
    "preflight results_dir": ("results_dir", ["preflight", "model=debug", "results_dir={path}"]),
    "run train.checkpoint_dir": (
        "train.checkpoint_dir",
        ["run", *POINT, "train.checkpoint=sync", "train.checkpoint_dir={path}", "results_dir={tmp}/r"],
    ),
    "report -o": ("-o/--out", ["report", "{tmp}/results", "-o", "{path}"]),
    "history -o": ("-o/--out", ["history", "--store", "{tmp}/store.sqlite", "-o", "{path}"]),
    "ab -o": ("-o/--out", ["ab", "--rounds", "1", "-o", "{path}", "model=debug"]),
}
OUTPUT_FILE_CASES = {
    "store add --store": ("--store", ["store", "add", "{tmp}/results", "--store", "{path}"]),
    "store rebuild --store": ("--store", ["store", "rebuild", "{tmp}/results", "--store", "{path}"]),
    "baseline save -o": ("-o/--output", ["baseline", "save", "{tmp}/results", "-o", "{path}"]),
    "calibrate -o": ("-o/--output", ["calibrate", "-o", "{path}"]),
    "check --junit": ("--junit", [*CHECK, "--junit", "{path}"]),
    "check --summary": ("--summary", [*CHECK, "--summary", "{path}"]),
}
OUTPUT_FOLDERS = [pytest.param(*case, id=name) for name, case in OUTPUT_FOLDER_CASES.items()]
OUTPUT_FILES = [pytest.param(*case, id=name) for name, case in OUTPUT_FILE_CASES.items()]
TOKEN_HINT = "; allowed: synthetic, or the path of a token file"
CREATE_HINT = "; create it with `fsdp-bench store add RESULTS --store {path}`"
CANCEL_HINT = "; give a results folder (results_dir) or a sweep folder"
# id -> (key, command line, what the path must be: file, folder or either, the hint every line of it ends with)
INPUT_CASES = {
    "--config-dir": ("--config-dir", ["plan", "--config-dir", "{path}", "model=debug"], "folder", ""),
    "run train.data": ("train.data", ["run", *POINT, "train.data={path}", "results_dir={tmp}/r"], "file", TOKEN_HINT),
    "history --store": ("--store", ["history", "--store", "{path}", "-o", "{tmp}/h"], "file", CREATE_HINT),
    "export --store": ("--store", ["store", "export", "{tmp}/t.csv", "--store", "{path}"], "file", ""),
    "stats --store": ("--store", ["store", "stats", "--store", "{path}"], "file", ""),
    "check --baseline": ("--baseline", ["check", "{tmp}/results", "--baseline", "{path}"], "any", ""),
    "plan --preflight": ("--preflight", ["plan", "--preflight", "{path}", "model=debug"], "any", ""),
    "plan --best --preflight": ("--preflight", ["plan", "--best", "--preflight", "{path}", "model=debug"], "any", ""),
    "calibrate --from-preflight": (
        "--from-preflight",
        ["calibrate", "--from-preflight", "{path}", "-o", "{tmp}/c/cluster/x.yaml"],
        "any",
        "",
    ),
    "report RESULTS": ("RESULTS", ["report", "{path}", "-o", "{tmp}/out"], "any", ""),
    "check RESULTS": ("RESULTS", ["check", "{path}", "--baseline", "{tmp}/results"], "any", ""),
    "baseline RESULTS": ("RESULTS", ["baseline", "save", "{path}", "-o", "{tmp}/b.json"], "any", ""),
    "store RESULTS": ("RESULTS", ["store", "add", "{path}", "--store", "{tmp}/s2.sqlite"], "any", ""),
    "cancel RESULTS": ("RESULTS", ["cancel", "{path}"], "folder", CANCEL_HINT),
}
INPUTS = [pytest.param(*case, id=name) for name, case in INPUT_CASES.items()]


def argv(template: list[str], path: Path, tmp: Path) -> list[str]:
    return [word.format(path=path, tmp=tmp) for word in template]


def assert_refused(command: list[str], expected: str, tmp: Path) -> None:
    """Exit 2, the one line, and nothing written: no launch folder, record, output, store or calibration."""
    before = files(tmp)
    code, err = call(command)
    assert (code, err) == (2, f"error: {expected}\n")
    assert files(tmp) == before


@pytest.mark.parametrize(("key", "template"), OUTPUT_FOLDERS)
def test_an_output_folder_that_is_a_file_or_under_one_is_refused(world, key, template):
    plain = world / "plain"
    assert_refused(argv(template, plain, world), f"{key}: {plain} is not a folder", world)
    under = plain / "sub"
    assert_refused(argv(template, under, world), f"{key}: {under} is not writable ({plain} is not a folder)", world)


@pytest.mark.parametrize(("key", "template"), OUTPUT_FILES)
def test_an_output_file_that_is_a_folder_or_under_a_file_is_refused(world, key, template):
    folder = world / "a-folder"
    folder.mkdir()
    assert_refused(argv(template, folder, world), f"{key}: {folder} is a folder; give a file", world)
    under = world / "plain" / "x.json"
    expected = f"{key}: {under} is not writable ({world / 'plain'} is not a folder)"
    assert_refused(argv(template, under, world), expected, world)


@pytest.mark.skipif(ROOT, reason="root writes into a 0o500 folder; the file-in-the-way cases stand for it")
@pytest.mark.parametrize(("key", "template"), [*OUTPUT_FOLDERS, *OUTPUT_FILES])
def test_an_output_in_a_folder_without_write_permission_is_refused(world, key, template):
    locked = world / "locked"
    locked.mkdir(mode=0o500)
    try:
        path = locked / "out"
        expected = f"{key}: {path} is not writable (no write permission in {locked})"
        assert_refused(argv(template, path, world), expected, world)
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize(("key", "template", "kind", "hint"), INPUTS)
def test_an_input_that_is_missing_or_of_the_wrong_kind_is_refused(world, key, template, kind, hint):
    missing = world / "nowhere"
    name = "token file " if key == "train.data" else ""
    expected = f"{key}: {name}{missing} does not exist{hint.format(path=missing)}"
    assert_refused(argv(template, missing, world), expected, world)
    if kind == "any":
        return  # a file or a folder: what it holds decides (one line each, in the command's own tests)
    wrong = world / "plain" if kind == "folder" else world / "a-folder"
    wrong.mkdir(exist_ok=True) if kind == "file" else None
    expected = f"{key}: {wrong} is not a {kind}{hint.format(path=wrong)}"
    assert_refused(argv(template, wrong, world), expected, world)


@pytest.mark.skipif(ROOT, reason="root reads a 0o000 file")
@pytest.mark.parametrize(("key", "template", "kind", "hint"), [p for p in INPUTS if p.values[2] != "folder"])
def test_an_unreadable_input_is_refused(world, key, template, kind, hint):
    secret = world / "secret"
    secret.write_bytes(b"\0" * 4096)
    secret.chmod(0)
    expected = f"{key}: {secret} is not readable (no read permission){hint.format(path=secret)}"
    assert_refused(argv(template, secret, world), expected, world)


@pytest.fixture
def read_only_disk(world):
    """A tmpfs holding a results folder and a store, then remounted read-only."""
    with small_tmpfs(world / "ro", "4m") as disk:
        write_record(make_record(), disk / "results" / "unit" / "p" / "result.json")
        SQLiteStore(disk / "store.sqlite").ingest(nights(3))
        remount_read_only(disk)
        yield disk


READ_ONLY = {  # a command writing on the read-only disk -> the file its one line names
    "run": (["run", *POINT, "results_dir={disk}/new"], "{disk}/new"),
    "sweep": (["sweep", *POINT, "results_dir={disk}/new"], "{disk}/new"),
    "sweep --dry-run": (["sweep", "--dry-run", *POINT, "results_dir={disk}/new"], "{disk}/new"),
    "checkpoint": (
        ["run", *POINT, "train.checkpoint=sync", "train.checkpoint_dir={disk}/ckpt", "results_dir={tmp}/r"],
        "{disk}/ckpt",
    ),  # fmt: skip
    "report": (["report", "{disk}/results", "-o", "{disk}/report"], "{disk}/report"),
    "store add": (["store", "add", "{disk}/results", "--store", "{disk}/new.sqlite"], "{disk}/new.sqlite"),
    "store add (existing)": (
        ["store", "add", "{disk}/results", "--store", "{disk}/store.sqlite"],
        "{disk}/store.sqlite",
    ),
    "calibrate": (["calibrate", "-o", "{disk}/calibration.json"], "{disk}/calibration.json"),
}


@pytest.mark.parametrize("case", list(READ_ONLY))
def test_a_read_only_disk_is_the_storage_line_and_exit_1_before_anything_runs(read_only_disk, world, case):
    template, named = READ_ONLY[case]
    command = [word.format(disk=read_only_disk, tmp=world) for word in template]
    before = files(world)
    code, err = call(command)
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: cannot write {named.format(disk=read_only_disk)}"), err
    assert ": Read-only file system (EROFS); " in err and err.endswith("make room and run the same command again\n")
    assert files(world) == before  # nothing launched (no launch folder), measured or written elsewhere


def test_a_sweep_tries_each_folder_once_whatever_its_points(world, monkeypatch):
    """results_dir and every point's missing checkpoint folder share one try: that of the existing
    folder they would be created in (one try per point costs a large grid seconds)."""
    tried = []
    mkstemp = tempfile.mkstemp

    def probe(*args, **kwargs):  # every test write is a mkstemp with the probe's prefix
        if kwargs.get("prefix") == ".fsdp-bench-probe-":
            tried.append(Path(kwargs["dir"]))
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", probe)
    results = world / "new" / "results"
    code, err = call(["sweep", "--dry-run", *POINT, "nodes=1", "strategy=full_shard,no_shard",
                      "train.checkpoint=sync", f"results_dir={results}"])  # fmt: skip
    assert (code, err) == (0, "")
    assert tried == [results] and not (world / "new").exists()


def test_store_add_on_a_full_disk_is_exit_1_with_the_storage_line(world):
    """A full disk is a fault (1), not invalid input (2): SQLite's "database or disk is full"."""
    results = world / "nights"
    for i, record in enumerate(nights(40)):
        write_record(record, results / f"p{i}" / "result.json")
    with small_tmpfs(world / "full", "1m") as disk:
        store = disk / "fsdp-bench.sqlite"
        SQLiteStore(store)
        fill(disk)
        code, err = call(["store", "add", results, "--store", store])
        assert code == 1, err
        assert err.count("\n") == 1 and err.startswith(
            f"error: cannot write {store}: No space left on device (ENOSPC); "
        )
        assert " free of 1.0 MiB there; " in err
        (disk / "ballast").unlink()  # room again: the same command adds every record
        assert call(["store", "add", results, "--store", store]) == (0, "")
        assert SQLiteStore(store).count() == 40
