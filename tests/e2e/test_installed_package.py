"""fsdp-bench as a user or an image gets it: built, installed outside the repository, run from elsewhere.

- The wheel (`python -m build`: the sdist, then the wheel built from it) holds every file of the
  packages' source folders, and installed with `--no-deps` into a fresh venv outside the checkout
  it runs `run`, `sweep` (two points), `report` (reading a version-1 record too), `check` and
  `plan` from a folder outside the checkout: a missing YAML file, template, migration table or CSV
  fails here, not on a cluster.
- The Dockerfile's install step (scripts/install_into_image.sh) installs the source tree into a
  fresh venv that has a torch, without replacing it, and offline: every other dependency is
  already there, so pip never looks for torch; a requirement for another torch fails on the
  script's constraint instead of replacing it.

Fresh venvs borrow this environment's torch and libraries (tests/e2e/fresh_venv.py). Every
command runs with its working directory in a temporary folder, never the checkout.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from bench_cli import CliRun, run_separately
from fresh_venv import ROOT, borrowed_site_packages, clean_env, docker_context_copy, fresh_venv, purelib_of

from bench.analysis.records import load_records

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
PACKAGES = ("bench", "reports", "fsdp_core", "sweeps")
TINY = ["model=debug", "train.steps=3", "train.warmup_steps=1", "train.seq_len=32", "results_dir=results"]
V1_SWEEP = ROOT / "tests" / "fixtures" / "records" / "v1" / "v1_mixed"


def run(cmd: list, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(map(str, cmd)), cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )


def installed_cli(script: Path, *args: object, cwd: Path) -> CliRun:
    """The installed copy's console script (not this checkout's), as a process of its own."""
    return run_separately(*args, program=[script], env=clean_env(), cwd=cwd, timeout=240)


def ok(proc: subprocess.CompletedProcess | CliRun) -> subprocess.CompletedProcess | CliRun:
    rc = proc.rc if isinstance(proc, CliRun) else proc.returncode
    assert rc == 0, f"{getattr(proc, 'args', '')}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def borrowed(tmp_path_factory) -> Path:
    return borrowed_site_packages(tmp_path_factory.mktemp("borrowed") / "site")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return docker_context_copy(tmp_path_factory.mktemp("context") / "fsdp-bench")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, source) -> Path:
    """sdist, then the wheel built from it (build isolation off: setuptools is here, the network is not needed)."""
    dist = tmp_path_factory.mktemp("dist")
    ok(run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source], cwd=dist))
    (built,) = dist.glob("fsdp_bench-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(tmp_path_factory, wheel, borrowed):
    """(python, fsdp-bench script, work folder) of a fresh venv holding only the wheel's fsdp-bench."""
    python = fresh_venv(tmp_path_factory.mktemp("venv") / "env", borrowed)
    work = tmp_path_factory.mktemp("work")
    ok(run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], cwd=work))
    return python, python.with_name("fsdp-bench"), work


@pytest.fixture(scope="module")
def used(installed):
    """The pipeline run from the work folder: run, a two-point sweep, report (with a v1 record), check, plan."""
    _, cli, work = installed
    shutil.copytree(V1_SWEEP, work / "results" / V1_SWEEP.name)
    return {
        "run": installed_cli(cli, "run", *TINY, "sweep.name=single", cwd=work),
        "sweep": installed_cli(cli, "sweep", *TINY, "train.micro_batch=1,2", "sweep.name=grid", cwd=work),
        "report": installed_cli(cli, "report", "results", "-o", "report", cwd=work),
        "check": installed_cli(
            cli, "check", "results/grid", "--baseline", "results/grid", "--junit", "check.xml", cwd=work
        ),
        "plan": installed_cli(cli, "plan", "model=llama3-8b", "cluster=p5.48xlarge", "nodes=1,2", "--json", cwd=work),
    }


def test_the_wheel_holds_every_file_of_the_package_folders(wheel, source):
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        path.relative_to(source).as_posix()
        for package in PACKAGES
        for path in (source / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert expected - shipped == set()
    assert {"sweeps/device/h100-sxm.yaml", "bench/schema/migrations/v1_registry.json"} <= shipped
    assert {
        "bench/analysis/planner/data/published_calibration.csv",
        "reports/report/templates/report.html.j2",
    } <= shipped


def test_the_installed_copy_is_the_one_that_runs(installed):
    python, cli, work = installed
    site = purelib_of(python)
    where = ok(run([python, "-c", "import bench, fsdp_core, sweeps; print(bench.__file__, sweeps.__file__)"], work))
    assert all(Path(p).is_relative_to(site) for p in where.stdout.split())
    # Outside a checkout the version has no commit.
    assert ok(installed_cli(cli, "--version", cwd=work)).stdout == f"fsdp-bench {VERSION}\n"


@pytest.mark.ranks
def test_run_and_a_two_point_sweep_record_ok_points_with_the_harness_version(installed, used):
    work = installed[2]
    ok(used["run"])
    ok(used["sweep"])
    (single,) = load_records(work / "results" / "single")[0]
    grid = load_records(work / "results" / "grid")[0]
    assert single.status == "ok" and single.metrics.tokens_per_step == 32
    assert sorted(r.spec.train.micro_batch for r in grid) == [1, 2] and {r.status for r in grid} == {"ok"}
    assert {r.env.harness for r in [single, *grid]} == {VERSION}
    assert {r.env.git_sha for r in [single, *grid]} == {None}
    assert (work / "results" / "grid" / "report" / "report.html").is_file()  # the sweep's own report


@pytest.mark.ranks
def test_report_reads_new_and_version_1_records(installed, used):
    work = installed[2]
    ok(used["report"])
    with open(work / "report" / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((r["sweep"], r["status"], r["harness"]) for r in rows) == [
        ("grid", "ok", VERSION),
        ("grid", "ok", VERSION),
        ("single", "ok", VERSION),
        ("v1_mixed", "ok", ""),  # migrated through bench/schema/migrations/v1_registry.json
        ("v1_mixed", "ok", ""),
    ]
    page = (work / "report" / "report.html").read_text()
    assert f"<th>fsdp-bench</th><td>{VERSION}</td>" in page


@pytest.mark.ranks
def test_check_against_its_own_results_passes(installed, used):
    work = installed[2]
    check = ok(used["check"])
    assert "PASS (2 point(s) compared" in check.stdout
    assert (work / "check.xml").read_text().count("<testcase") >= 4


@pytest.mark.ranks
def test_plan_predicts_from_the_shipped_model_and_cluster(used):
    points = json.loads(ok(used["plan"]).stdout)
    assert [(p["spec"]["model"]["name"], p["spec"]["nodes"]) for p in points] == [("llama3-8b", 1), ("llama3-8b", 2)]
    # The device comes from sweeps/device/h100-sxm.yaml through the cluster preset.
    assert {p["spec"]["cluster"]["device"]["name"] for p in points} == {"h100-sxm"}
    assert all(p["device_memory_bytes"] == 80 * 2**30 and p["tokens_per_s"] > 0 for p in points)


def test_the_image_install_step_keeps_torch_and_works_offline(tmp_path, source, borrowed):
    """scripts/install_into_image.sh, as the Dockerfile runs it, into a fresh venv with a torch."""
    python = fresh_venv(tmp_path / "env", borrowed)
    torch_check = (
        "import importlib.metadata as m, importlib.util as u; print(m.version('torch'), u.find_spec('torch').origin)"
    )
    where_is_torch = [python, "-c", torch_check]
    torch_before = ok(run(where_is_torch, tmp_path)).stdout
    install = [
        "env",
        f"PYTHON={python}",
        source / "scripts" / "install_into_image.sh",
        "--no-index",
        "--no-build-isolation",
    ]
    # A requirement for another torch fails on the constraint; nothing is installed.
    other_torch = run(
        [*install[:2], f"FSDP_BENCH_EXTRA_PACKAGES=torch!={torch_before.split()[0]}", *install[2:]], tmp_path
    )
    assert other_torch.returncode != 0 and "(constraint) torch" in other_torch.stdout + other_torch.stderr
    assert not list(purelib_of(python).glob("fsdp_bench-*"))
    install = run(install, cwd=tmp_path)
    ok(install)
    assert "torch kept" in install.stdout
    site = purelib_of(python)
    assert not (site / "torch").exists()  # nothing installed a torch of its own
    assert ok(run(where_is_torch, tmp_path)).stdout == torch_before
    assert [p.name for p in site.glob("fsdp_bench-*.dist-info")] == [f"fsdp_bench-{VERSION}.dist-info"]
    assert (
        ok(installed_cli(python.with_name("fsdp-bench"), "--version", cwd=tmp_path)).stdout == f"fsdp-bench {VERSION}\n"
    )
