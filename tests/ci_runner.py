"""Runs the pipelines of ci/ on this machine, as their CI services would run their shell steps.

Each pipeline's shell steps run in order, in a folder that stands for its checkout (`run:` steps in
GitHub Actions, `before_script` then `script` in GitLab CI, the batch script for Slurm), with the
environment the service would give them: the job's `env:` with `${{ vars.NAME }}` read from the
settings a CI owner would enter, GitLab's `variables:` under the project's CI/CD variables, the
variable lines of ci/scrontab under the same settings. The steps only a CI service runs are mapped
to local folders (docs/ci.md lists the mapping): the checkout is that folder, an artifact upload or a
JUnit report names paths that must exist there after the steps, and `$GITHUB_STEP_SUMMARY` is a file.

The three pipelines call the same ci/nightly.sh with the same inputs, so the nightly runs once: in
the checkout folders, ci/nightly.sh records the inputs it was handed, then runs the real script (the
first pipeline) or copies that run's outputs into its own output folder (the others), and
`scripts/setup.sh` does nothing (the suite's environment is installed already).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CI = REPO / "ci"
NIGHTLY = CI / "nightly.sh"
PIPELINES = {"github": CI / "github-nightly.yml", "gitlab": CI / "gitlab-nightly.yml", "slurm": CI / "slurm-nightly.sh"}
SCRONTAB = CI / "scrontab"
# What ci/nightly.sh reads: the inputs every pipeline must hand it alike (the output folder aside).
INPUTS = (
    "FSDP_BENCH_STORE", "FSDP_BENCH_BASELINE", "FSDP_BENCH_OVERRIDES", "FSDP_BENCH_REPEATS", "FSDP_BENCH_NEW_RUNS",
    "FSDP_BENCH_HISTORY_ARGS", "FSDP_BENCH_CHECK_ARGS",
)  # fmt: skip

# The stand-in for ci/nightly.sh in a checkout folder: records its environment, then runs the real
# script or replays its outputs.
RECORDER = """#!/usr/bin/env bash
env -0 > "$CI_RUNNER_RECORD"
if [ -n "${CI_RUNNER_REPLAY:-}" ]; then
  mkdir -p "$FSDP_BENCH_OUT" && cp -R "$CI_RUNNER_REPLAY"/. "$FSDP_BENCH_OUT"/
  exit "$CI_RUNNER_RC"
fi
exec "$CI_RUNNER_NIGHTLY"
"""


@dataclass
class PipelineRun:
    """What one pipeline's steps left: the exit code of each shell step, the inputs ci/nightly.sh
    was handed, the paths its uploads and JUnit reports name, and its checkout folder."""

    name: str
    checkout: Path
    exit_codes: list[int] = field(default_factory=list)  # of each shell step run
    nightly_rc: int | None = None  # of the step that calls ci/nightly.sh
    inputs: dict[str, str] = field(default_factory=dict)
    uploads: list[str] = field(default_factory=list)
    junit: list[str] = field(default_factory=list)
    output: str = ""


def checkout_folder(root: Path) -> Path:
    """A folder standing for the pipeline's checkout: ci/ as committed, the recorder, a no-op setup."""
    root.mkdir(parents=True)
    shutil.copytree(CI, root / "ci")
    (root / "ci" / "nightly.sh").write_text(RECORDER)
    (root / "scripts").mkdir()
    (root / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\n# the suite's environment is installed\n")
    for script in (root / "ci" / "nightly.sh", root / "scripts" / "setup.sh", root / "ci" / "slurm-nightly.sh"):
        script.chmod(0o755)
    return root


def base_environment() -> dict[str, str]:
    """This environment, with this interpreter's fsdp-bench first on PATH and this checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSDP_BENCH_", "GITHUB_", "CI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    return env


def _shell(script: str, env: dict[str, str], cwd: Path, errexit: bool = True) -> tuple[int, str]:
    flags = ["-eo", "pipefail"] if errexit else []
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", *flags, "-c", script], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _expression(text: str, settings: dict[str, str], context: dict[str, str]) -> str:
    """`${{ vars.NAME }}`, `${{ vars.NAME || 'default' }}` and `${{ github.x }}` of a workflow value."""

    def one(match: re.Match) -> str:
        options = [part.strip() for part in match[1].split("||")]
        for option in options:
            if option.startswith("vars."):
                value = settings.get(option[len("vars.") :], "")
            elif option.startswith("'") and option.endswith("'"):
                value = option[1:-1]
            elif option in context:
                value = context[option]
            else:
                raise ValueError(f"the runner does not know the expression {match[0]!r}")
            if value:
                return value
        return ""

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))


def _recorded(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    pairs = [item.split("=", 1) for item in path.read_text().split("\0") if "=" in item]
    return {k: v for k, v in pairs if k.startswith("FSDP_BENCH_")}


def _runner_env(root: Path, replay: tuple[Path, int] | None) -> dict[str, str]:
    env = base_environment()
    env.update(CI_RUNNER_RECORD=str(root / "inputs.env"), CI_RUNNER_NIGHTLY=str(NIGHTLY))
    if replay is not None:
        env.update(CI_RUNNER_REPLAY=str(replay[0]), CI_RUNNER_RC=str(replay[1]))
    return env


def run_github(root: Path, settings: dict[str, str], replay: tuple[Path, int] | None = None) -> PipelineRun:
    """The workflow's one job: its `run:` steps in order (a failed step ends the job, as GitHub's
    default shell `bash -e` does; a step with an `if:` runs anyway, as `!cancelled()` says)."""
    checkout = checkout_folder(root / "checkout")
    workflow = yaml.safe_load(PIPELINES["github"].read_text())
    (job,) = workflow["jobs"].values()
    summary = root / "step_summary.md"
    context = {"github.run_id": "1", "github.workspace": str(checkout), "!cancelled()": "true"}
    env = _runner_env(root, replay) | {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(checkout)}
    env |= {k: _expression(v, settings, context) for k, v in {**workflow.get("env", {}), **job["env"]}.items()}
    run = PipelineRun("github", checkout)
    failed = False
    for step in job["steps"]:
        if failed and "if" not in step:
            continue
        if "run" in step:
            code, output = _shell(step["run"], env, checkout)
            run.exit_codes.append(code)
            run.output += output
            run.nightly_rc = code if "ci/nightly.sh" in step["run"] else run.nightly_rc
            failed = failed or code != 0
        elif step["uses"].startswith("actions/upload-artifact@"):
            run.uploads += step["with"]["path"].split()
        elif step["uses"].startswith("mikepenz/action-junit-report@"):
            run.junit += step["with"]["report_paths"].split()
    run.inputs = _recorded(root / "inputs.env")
    return run


def run_gitlab(root: Path, settings: dict[str, str], replay: tuple[Path, int] | None = None) -> PipelineRun:
    """The job's `before_script` then `script` in one shell (as the GitLab runner does), with its
    `variables:` under the project's CI/CD variables (`settings`), which take precedence."""
    checkout = checkout_folder(root / "checkout")
    pipeline = yaml.safe_load(PIPELINES["gitlab"].read_text())
    (job,) = [v for k, v in pipeline.items() if isinstance(v, dict) and "script" in v]
    env = _runner_env(root, replay) | {"CI_PROJECT_DIR": str(checkout), "CI_PIPELINE_SOURCE": "schedule"}
    env |= {k: str(v) for k, v in {**pipeline.get("variables", {}), **job["variables"]}.items()}
    env |= settings
    run = PipelineRun("gitlab", checkout)
    code, run.output = _shell("\n".join([*job["before_script"], *job["script"]]), env, checkout)
    run.exit_codes.append(code)
    run.nightly_rc = code
    run.uploads = list(job["artifacts"]["paths"])
    run.junit = list(job["artifacts"]["reports"]["junit"])
    run.inputs = _recorded(root / "inputs.env")
    return run


def scrontab_entry() -> tuple[dict[str, str], list[str], str]:
    """ci/scrontab: its variable lines, the #SCRON options and the command of its one entry."""
    variables, options, command = {}, [], ""
    for line in SCRONTAB.read_text().splitlines():
        if line.startswith("#SCRON"):
            options += line.split()[1:]
        elif line.startswith("#") or not line.strip():
            continue
        elif re.match(r"^[A-Z_][A-Z0-9_]*=", line):
            name, value = line.split("=", 1)
            variables[name] = value
        else:
            command = line.split(None, 5)[5]
    return variables, options, command


def run_slurm(root: Path, settings: dict[str, str], replay: tuple[Path, int] | None = None) -> PipelineRun:
    """The batch script as scrontab runs it: the scrontab's variables under `settings` (the site's
    paths), FSDP_BENCH_CHECKOUT the checkout folder."""
    checkout = checkout_folder(root / "checkout")
    variables, _, _ = scrontab_entry()
    env = _runner_env(root, replay) | variables | settings | {"FSDP_BENCH_CHECKOUT": str(checkout)}
    run = PipelineRun("slurm", checkout)
    code, run.output = _shell(f"exec {checkout / 'ci' / 'slurm-nightly.sh'}", env, checkout)
    run.exit_codes.append(code)
    run.nightly_rc = code
    run.inputs = _recorded(root / "inputs.env")
    return run


RUNNERS = {"github": run_github, "gitlab": run_gitlab, "slurm": run_slurm}


def shell_steps() -> dict[str, str]:
    """Every shell step of the pipelines, by a name (for ShellCheck): GitHub's `run:` steps and
    GitLab's `before_script` + `script`, each as a bash script."""
    steps = {}
    workflow = yaml.safe_load(PIPELINES["github"].read_text())
    for job_name, job in workflow["jobs"].items():
        for number, step in enumerate(job["steps"], start=1):
            if "run" in step:
                steps[f"github {job_name} step {number}"] = step["run"]
    pipeline = yaml.safe_load(PIPELINES["gitlab"].read_text())
    for job_name, job in pipeline.items():
        if isinstance(job, dict) and "script" in job:
            steps[f"gitlab {job_name}"] = "\n".join([*job.get("before_script", []), *job["script"]])
    return steps
