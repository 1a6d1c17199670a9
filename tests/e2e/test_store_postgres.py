"""The results store in a real PostgreSQL server beside the SQLite default (bench/analysis/store/):
the same records give the same results on both back-ends, three processes ingest one database at
once, `store copy` moves a store both ways, a password in the URL is never printed or written, and
bad input is one line naming the store, exit 2.

One throwaway server for the whole file (module scope; `--dist loadfile` keeps the file on one
worker): initdb and pg_ctl in a temporary folder, the Unix socket there, a free loopback port,
fsync off. initdb and postgres refuse to run as root, so as root (CI) they run as the `postgres`
user Debian's package creates (`runuser -u postgres`), in a folder that user owns. Where the server
cannot be had (no binaries: scripts/deps/postgresql.sh installs them as root; no psycopg), every
test skips with the reason. Commands run in-process (tests/bench_cli.py) but for the writers.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bench_cli import fsdp_bench, in_process
from shared_launch import CPU_SMOKE_SWEEP, session_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import START, make_record, night, nights  # noqa: E402

from bench.analysis.records import write_record  # noqa: E402

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "baselines" / "cpu_smoke.json"
USER, PASSWORD = "ci", "Pg-s3cret-7f3a"  # a password no command may print or write


@dataclass
class Server:
    """A running throwaway server: its socket folder and port, and a way to make databases in it."""

    folder: Path
    port: int

    def admin(self, sql: str, dbname: str = "postgres") -> list[tuple]:
        """Run `sql` as the superuser over the Unix socket (trust), autocommit."""
        import psycopg

        with psycopg.connect(host=str(self.folder), port=self.port, user="postgres", dbname=dbname) as conn:
            conn.autocommit = True
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def database(self, name: str, *, password: str = PASSWORD) -> str:
        """A new empty database owned by the test user; its URL (TCP, password auth)."""
        self.admin(f"CREATE DATABASE {name} OWNER {USER}")
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{name}"


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[Server]:
    """A throwaway PostgreSQL cluster for this file, stopped and removed afterwards."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'fsdp-bench[postgres]')")
    binaries = _binaries()
    if binaries is None and os.geteuid() == 0 and shutil.which("apt-get"):  # as make test would have
        subprocess.run(["bash", str(REPO / "scripts" / "deps" / "postgresql.sh")], capture_output=True, timeout=600)
        binaries = _binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries (scripts/deps/postgresql.sh installs them, as root with apt)")
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="fsdp-bench-pg-"))
    if os.geteuid() == 0:  # initdb and postgres refuse root: run them as the package's postgres user
        if shutil.which("runuser") is None or subprocess.run(["id", "postgres"], capture_output=True).returncode:
            shutil.rmtree(folder)
            pytest.skip("running as root without a `postgres` user (or runuser) to run the server as")
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()
    init = subprocess.run(
        [*as_user, str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8", "--no-sync",
         "--auth-local=trust", "--auth-host=scram-sha-256"],
        capture_output=True, text=True,
    )  # fmt: skip
    if init.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"initdb failed: {init.stderr.strip()[-500:]}")
    options = f"-k {folder} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    pg_ctl = [*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log")]
    start = subprocess.run([*pg_ctl, "-w", "-o", options, "start"], capture_output=True, text=True)
    if start.returncode:
        log = (folder / "server.log").read_text() if (folder / "server.log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"the PostgreSQL server did not start: {start.stderr.strip()[-300:]} {log[-300:]}")
    try:
        server = Server(folder, port)
        server.admin(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
        yield server
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory) -> Path:
    """The session's cpu_smoke sweep (tests/shared_launch.py; test_check_cli.py reads it too)."""
    sweep = lambda results: fsdp_bench(*CPU_SMOKE_SWEEP, f"results_dir={results}", timeout=840)  # noqa: E731
    return session_results(tmp_path_factory, "cpu_smoke", sweep)


def _ok(*args: object, **kwargs):
    run = in_process(*args, **kwargs)
    assert run.rc == 0, run.stdout + run.stderr
    return run


def _nightly_results(root: Path) -> Path:
    """Twelve nights of one configuration with a 20 % step down at night 6 and a torch upgrade with it
    (as tests/unit/test_history.py builds them), plus a second configuration without one, and two
    nights' preflights."""
    other = make_record(tokens_per_s=500.0, strategy="no_shard")
    records = nights(12, step_at=6, torch="2.13.0") + [night(i, 500.0, record=other) for i in range(8)]
    for i, record in enumerate(records):
        write_record(record, root / record.sweep / f"p{i}" / "result.json")
    _write_preflights(root)
    return root


@pytest.mark.ranks
def test_cpu_smoke_records_give_the_same_results_in_sqlite_and_postgresql(cpu_smoke, postgres_server, tmp_path):
    url = postgres_server.database("smoke")
    outputs = {}
    for name, store in (("sqlite", tmp_path / "smoke.sqlite"), ("postgres", url)):
        first = _ok("store", "add", cpu_smoke, "--store", store)
        again = _ok("store", "add", cpu_smoke, "--store", store)
        assert "12 added, 0 already stored, 0 refused; 12 records in all" in first.stdout
        assert "0 added, 12 already stored, 0 refused; 12 records in all" in again.stdout
        report = _ok("report", store, "-o", tmp_path / f"report-{name}")
        check = in_process("check", store, "--baseline", BASELINE, "--no-gate-timings")
        assert check.rc == 0, check.stdout + check.stderr
        _ok("baseline", "save", store, "-o", tmp_path / f"{name}.json")
        _ok("store", "export", tmp_path / f"{name}.csv", "--store", store)
        saved = json.loads((tmp_path / f"{name}.json").read_text())
        outputs[name] = {
            "report": report.stdout.split(": ", 1)[1].replace(name, "X"),
            "results.csv": (tmp_path / f"report-{name}" / "results.csv").read_text(),
            "check": check.stdout.splitlines()[-1],
            "baseline": {k: v for k, v in saved.items() if k not in ("created_at", "source")},
            "export": (tmp_path / f"{name}.csv").read_text(),
        }
    assert outputs["sqlite"] == outputs["postgres"]
    assert outputs["postgres"]["check"].startswith("PASS (12 point(s) compared")
    assert len(outputs["postgres"]["baseline"]["points"]) == 12


def test_nightly_series_give_the_same_history_in_sqlite_and_postgresql(postgres_server, tmp_path):
    results = _nightly_results(tmp_path / "results")
    url = postgres_server.database("nightly")
    found = {}
    for name, store in (("sqlite", tmp_path / "nightly.sqlite"), ("postgres", url)):
        assert "20 added" in _ok("store", "add", results, "--store", store).stdout
        assert "0 added, 20 already stored" in _ok("store", "add", results, "--store", store).stdout
        out = tmp_path / f"history-{name}"
        run = in_process("history", "--store", store, "-o", out, "--fail-on-new-regression", "6")
        shown = run.stdout.replace(str(store).replace(PASSWORD, "***"), "STORE")
        xml = (out / "history.xml").read_text().replace(str(store).replace(PASSWORD, "***"), "STORE")
        found[name] = (run.rc, shown.replace(str(out), "OUT"), xml.replace(str(out), "OUT"))
    assert found["sqlite"] == found["postgres"]
    rc, shown, _ = found["postgres"]
    assert rc == 1 and "1 change point(s)" in shown and "torch: 2.12.0 -> 2.13.0" in shown


def test_three_processes_ingesting_overlapping_folders_store_the_union_once(postgres_server, tmp_path):
    """Folders a, b, c of 120 records each; the processes ingest (a, b), (b, c) and (c, a) at once, 25
    records per transaction: every record stored once, each process told what it added."""
    template = make_record()
    for part in "abc":
        for seed in range(120):
            train = template.spec.train.model_copy(update={"seed": seed + 1000 * "abc".index(part)})
            spec = template.spec.model_copy(update={"train": train})
            record = template.model_copy(update={"spec": spec, "point_id": spec.point_id, "sweep": f"sweep_{part}"})
            write_record(record, tmp_path / part / record.point_id / "result.json")
    url = postgres_server.database("writers")
    command = [
        sys.executable, "-c",
        "import sys; from bench.analysis import store; from bench.analysis.store import rows; rows.BATCH_SIZE = 25; "
        "r = store.add(sys.argv[1], sys.argv[2:]); print(r.added, r.unchanged, len(r.problems))",
    ]  # fmt: skip
    pairs = [("a", "b"), ("b", "c"), ("c", "a")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [*command, url, *(str(tmp_path / p) for p in pair)], stdout=subprocess.PIPE, text=True, env=env
        )
        for pair in pairs
    ]
    outputs = [[int(n) for n in proc.communicate(timeout=180)[0].split()] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0]
    assert all(added + unchanged == 240 and problems == 0 for added, unchanged, problems in outputs)
    assert sum(added for added, _, _ in outputs) == 360
    stats = _ok("store", "stats", "--store", url)
    assert "360 records, 0 preflights (schema 5)" in stats.stdout
    rows = postgres_server.admin("SELECT sweep, count(*) FROM results GROUP BY sweep ORDER BY sweep", "writers")
    assert rows == [("sweep_a", 120), ("sweep_b", 120), ("sweep_c", 120)]


def test_store_copy_moves_a_store_to_postgresql_and_back_row_for_row(postgres_server, tmp_path):
    import sqlite3
    from contextlib import closing

    from bench.analysis.store import COLUMNS, PREFLIGHT_COLUMNS

    results = _nightly_results(tmp_path / "results")
    source, back = tmp_path / "source.sqlite", tmp_path / "back.sqlite"
    _ok("store", "add", results, "--store", source)
    url = postgres_server.database("copied")
    there = _ok("store", "copy", source, url)
    assert "20 added, 0 already stored; preflights: 2 added, 0 already stored; 20 records, 2 preflights" in there.stdout
    again = _ok("store", "copy", source, url)
    assert "0 added, 20 already stored; preflights: 0 added, 2 already stored" in again.stdout
    _ok("store", "copy", url, back)

    def rows(path: Path) -> tuple[list, list]:
        with closing(sqlite3.connect(path)) as conn:
            results = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY rowid").fetchall()
            preflights = conn.execute(f"SELECT {', '.join(PREFLIGHT_COLUMNS)} FROM preflights ORDER BY rowid")
            return results, preflights.fetchall()

    assert rows(back) == rows(source) and len(rows(back)[0]) == 20 and len(rows(back)[1]) == 2
    assert _ok("store", "stats", "--store", back).stdout.endswith("20 records, 2 preflights (schema 5)\n")


def _write_preflights(results: Path) -> None:
    """Two nights' preflight records (scripts/p5_anchor_from_preflight.py makes them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("p5_anchor", REPO / "scripts" / "p5_anchor_from_preflight.py")
    anchor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(anchor)
    from datetime import timedelta

    for day, busbw in ((0, 150.0), (1, 300.0)):
        preflight = anchor.preflight_record(busbw).model_copy(
            update={"sweep": f"night{day:02d}", "started_at": (START + timedelta(days=day)).isoformat()}
        )
        path = results / f"night{day:02d}" / "_preflight" / "2x8" / "preflight.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(preflight.model_dump_json())


def test_a_password_in_the_url_is_never_printed_or_written(postgres_server, tmp_path):
    results = _nightly_results(tmp_path / "results")
    url = postgres_server.database("secret")
    runs = [
        _ok("store", "add", results, "--store", url),
        _ok("store", "stats", "--store", url),
        in_process("history", "--store", url, "-o", tmp_path / "history"),
        _ok("report", url, "-o", tmp_path / "report"),
        _ok("baseline", "save", url, "-o", tmp_path / "baseline.json"),
        in_process("check", results, "--baseline", url, "--junit", tmp_path / "j.xml", "--summary", tmp_path / "s.md"),
        _ok("store", "export", tmp_path / "out.csv", env={**os.environ, "FSDP_BENCH_STORE": url}),
        in_process("store", "stats", "--store", url.replace(PASSWORD, PASSWORD + "x")),  # refused: its line
        in_process("history", "--store", url.replace("/secret", "/nowhere"), "-o", tmp_path / "h2"),
        in_process("store", "stats", "--help", env={**os.environ, "FSDP_BENCH_STORE": url}),
    ]
    masked = url.replace(PASSWORD, "***")
    assert masked in runs[0].stdout and masked in (tmp_path / "history" / "summary.md").read_text()
    assert "***" in (tmp_path / "history" / "history.html").read_text()
    assert [run.rc for run in runs[-3:]] == [2, 2, 0]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "results" not in p.parts]
    assert len(written) > 10
    leaks = [run.stdout + run.stderr for run in runs if PASSWORD in run.stdout + run.stderr]
    leaks += [str(p) for p in written if PASSWORD.encode() in p.read_bytes()]
    assert leaks == []


# The cases history is asked too (each history starts its worker pool: a second or so).
HISTORY_CASES = ("unknown scheme", "wrong password", "foreign")


def test_bad_stores_are_one_line_naming_the_store_exit_2_and_nothing_written(postgres_server, tmp_path, monkeypatch):
    from bench.analysis.store import postgres
    from bench.analysis.store.location import masked

    results = _nightly_results(tmp_path / "results")
    url = postgres_server.database("bad")
    foreign = postgres_server.database("other_app")
    postgres_server.admin("CREATE TABLE orders (id int); GRANT ALL ON orders TO ci", "other_app")
    newer = postgres_server.database("newer")
    _ok("store", "add", results, "--store", newer)
    postgres_server.admin("UPDATE fsdp_bench_store SET schema_version = 99", "newer")
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        hanging = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{silent.getsockname()[1]}/bench"
        monkeypatch.setattr(postgres, "CONNECT_TIMEOUT_S", 1)  # the default is 10 s: the same rule, sooner
        cases = {
            "unknown scheme": (url.replace("postgresql://", "mysql://"), "unknown store scheme 'mysql://'"),
            "wrong password": (url.replace(PASSWORD, "Wr0ng-pass"), "password authentication failed"),
            "refused": (url.replace(str(postgres_server.port), str(_free_port())), "Connection refused"),
            "timeout": (hanging, "timeout expired"),
            "foreign": (foreign, "is a foreign database (tables: orders), not a store"),
            "newer": (newer, "schema version 99, this fsdp-bench reads up to 5"),
            "no database": (url.replace("/bad", "/missing"), 'database "missing" does not exist'),
        }
        for case, (store, says) in cases.items():
            history = [("history", "--store", store, "-o", tmp_path / "h")] if case in HISTORY_CASES else []
            for args in [("store", "add", results, "--store", store), *history]:
                run = in_process(*args)
                assert (run.rc, run.stdout) == (2, ""), (case, run.stdout + run.stderr)
                lines = run.stderr.strip().splitlines()
                assert len(lines) == 1 and says in lines[0], (case, lines)
                assert lines[0].startswith(f"error: --store: {masked(store)}") and "***" in lines[0], lines
                assert PASSWORD not in lines[0] and "Wr0ng-pass" not in lines[0]
    assert not (tmp_path / "h").exists()
    assert postgres_server.admin("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'", "other_app") == [("orders",)]  # fmt: skip
    assert postgres_server.admin("SELECT count(*) FROM results", "newer") == [(20,)]
    monkeypatch.setitem(sys.modules, "psycopg", None)  # the driver not installed
    run = in_process("store", "stats", "--store", url)
    assert (run.rc, run.stderr.strip()) == (
        2, f"error: --store: {url.replace(PASSWORD, '***')}: a PostgreSQL store needs the psycopg driver: "
        "pip install 'fsdp-bench[postgres]'",
    )  # fmt: skip


def test_rebuild_drops_only_the_store_tables(postgres_server, tmp_path):
    results = _nightly_results(tmp_path / "results")
    url = postgres_server.database("rebuilt")
    _ok("store", "add", results, "--store", url)
    postgres_server.admin("DELETE FROM results WHERE sweep = 'night00'", "rebuilt")
    assert "18 records" in _ok("store", "stats", "--store", url).stdout
    rebuilt = _ok("store", "rebuild", results, "--store", url)
    assert "20 added, 0 already stored, 0 refused; 20 records in all" in rebuilt.stdout
    tables = postgres_server.admin("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1", "rebuilt")
    assert tables == [("fsdp_bench_store",), ("preflights",), ("results",)]
