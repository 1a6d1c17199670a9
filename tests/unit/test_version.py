"""The harness version: one source (pyproject.toml through the package metadata), the commit only
from this package's own checkout, `--version`, the launch file and the report header."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from bench_cli import in_process

from bench.schema.protocol import GitInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.report.frame import records_to_frame  # noqa: E402
from bench.config import version  # noqa: E402
from bench.config.compose import spec_from_fields  # noqa: E402
from bench.run.execute import prepare_launch  # noqa: E402
from bench.schema.protocol import LaunchFile  # noqa: E402
from reports.report.environment import environment_lines  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_the_version_number_comes_from_pyproject_through_the_metadata():
    assert version.package_version() == importlib.metadata.version("fsdp-bench") == PYPROJECT_VERSION


def test_an_uninstalled_checkout_reads_its_pyproject(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert version.package_version() == PYPROJECT_VERSION


def test_harness_version_appends_the_commit_and_the_dirty_flag():
    sha = "65c1c7b91250" + "ab" * 14
    assert version.harness_version(GitInfo(sha=sha, dirty=False)) == f"{PYPROJECT_VERSION}+g65c1c7b91250"
    assert version.harness_version(GitInfo(sha=sha, dirty=True)) == f"{PYPROJECT_VERSION}+g65c1c7b91250.dirty"
    assert version.harness_version(GitInfo()) == PYPROJECT_VERSION


@needs_git
def test_git_info_of_this_checkout_names_its_head():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    info = version.git_info()
    assert info.sha == git(ROOT, "rev-parse", "HEAD")
    assert info.dirty == bool(git(ROOT, "status", "--porcelain", "--untracked-files=no"))


@needs_git
def test_an_installed_copy_inside_another_repository_reports_no_commit(tmp_path, monkeypatch):
    """A venv inside some project's repository: its site-packages is not this package's checkout."""
    repo = tmp_path / "their-project"
    site = repo / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "theirs")
    monkeypatch.setattr(version, "PACKAGE_ROOT", site)
    monkeypatch.delenv(version.GIT_SHA_ENV, raising=False)
    assert version.git_info() == GitInfo()
    assert version.harness_version() == PYPROJECT_VERSION
    # An image built with GIT_SHA carries its commit in the environment instead.
    monkeypatch.setenv(version.GIT_SHA_ENV, "0123456789abcdef0123")
    assert version.git_info() == GitInfo(sha="0123456789abcdef0123")
    assert version.harness_version() == f"{PYPROJECT_VERSION}+g0123456789ab"


def test_cli_version_prints_the_harness_version():
    run = in_process("--version")  # argparse's exit 0 after printing
    assert (run.rc, run.stdout) == (0, f"fsdp-bench {version.harness_version()}\n")


def test_the_launch_file_carries_the_harness_and_commit(tmp_path):
    spec = spec_from_fields(model="debug", **{"sweep.name": "unit"})
    request = prepare_launch([spec], tmp_path)
    launch = LaunchFile.read(request.launch_file)
    assert launch.harness == version.harness_version(launch.git)
    assert launch.harness.startswith(PYPROJECT_VERSION)
    assert LaunchFile.model_validate({"points": []}).harness is None  # a launch file from before the field


def test_report_header_lists_every_harness_version():
    records = [
        make_record(micro_batch=1, env={"torch": "2.13.0", "harness": "0.1.0+g65c1c7b91250"}),
        make_record(micro_batch=2, env={"torch": "2.13.0", "harness": "0.2.0"}),
        make_record(micro_batch=4, env={"torch": "2.13.0"}),  # a record from before the field
    ]
    lines = dict(environment_lines(records_to_frame(records)))
    assert lines["fsdp-bench"] == "0.1.0+g65c1c7b91250, 0.2.0"
