"""Fresh virtual environments outside the repository, for testing fsdp-bench as installed.

Installing torch and the other heavy dependencies again would cost minutes and gigabytes (and the
network), so a fresh environment borrows the ones this interpreter has: a folder of links to
every entry of its site-packages except fsdp-bench's own (its dist-info and editable-install
hooks), named by a path line in a `.pth` file. A path line does not run the `.pth` files of the
folder it names, and fsdp-bench's entries are not linked at all, so the fresh environment sees no
fsdp-bench but what is installed into it. pip is borrowed too: `ENV/bin/python -m pip` installs
into ENV.

The source tree is copied as the Docker build context is (the .dockerignore patterns), so builds
and installs never write into the checkout and a file the image would lack is missing here too.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWN_ENTRIES = ("fsdp_bench", "__editable__", "__pycache__")
# Variables that would make an installed copy read this checkout or a user's configs.
SCRUBBED_ENV = ("PYTHONPATH", "PYTHONHOME", "FSDP_BENCH_GIT_SHA", "FSDP_BENCH_CONFIG_DIR", "VIRTUAL_ENV")


def borrowed_site_packages(dest: Path) -> Path:
    """Links to everything this interpreter has installed, fsdp-bench excepted (first folder wins)."""
    dest.mkdir(parents=True)
    for folder in map(Path, site.getsitepackages()):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            link = dest / entry.name
            if entry.name.startswith(OWN_ENTRIES) or entry.suffix == ".pth" or link.exists():
                continue
            link.symlink_to(entry)
    return dest


def fresh_venv(dest: Path, borrowed: Path) -> Path:
    """A venv without pip of its own that sees `borrowed`; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    python = dest / "bin" / "python"
    (purelib_of(python) / "_borrowed_from_the_test_env.pth").write_text(f"{borrowed}\n")
    return python


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _ignored(relative: str, patterns: list[str]) -> bool:
    """A .dockerignore match: `**/x` anywhere, any other pattern against the path from the root."""
    name = relative.rsplit("/", 1)[-1]
    for pattern in patterns:
        if pattern.startswith("**/"):
            if fnmatch.fnmatch(name, pattern[3:]):
                return True
        elif fnmatch.fnmatch(relative, pattern):
            return True
    return False


def docker_context_copy(dest: Path) -> Path:
    """This source tree as the Docker build context sees it."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.startswith("#")]

    def ignore(directory: str, names: list[str]) -> set[str]:
        base = Path(directory).relative_to(ROOT).as_posix()
        prefix = "" if base == "." else f"{base}/"
        return {n for n in names if _ignored(prefix + n, patterns)}

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)
    return dest


def purelib_of(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())
