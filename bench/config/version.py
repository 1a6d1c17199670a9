"""Which fsdp-bench this is: the package version, plus the git commit when it runs from a checkout.

The version number has one source, pyproject.toml: an installed copy reads it from the package
metadata written at install time; a source checkout that was never installed reads pyproject.toml
itself. The commit comes from git only when this package *is* a checkout's working tree (an
installed copy inside some other repository must not report that repository's commit); an image
built without `.git` can be given it at build time through FSDP_BENCH_GIT_SHA (the Dockerfile's
GIT_SHA build argument).

    harness_version()  ->  "0.1.0"                  installed, commit unknown
                           "0.1.0+g65c1c7b1a2b3"     a clean checkout (12 hex digits of the commit)
                           "0.1.0+g65c1c7b1a2b3.dirty"  tracked files changed since that commit
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
from pathlib import Path

from bench.schema.protocol import GitInfo

DIST_NAME = "fsdp-bench"
# The folder holding the bench package: a checkout's root, or site-packages for an installed copy.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
GIT_SHA_ENV = "FSDP_BENCH_GIT_SHA"
SHA_DIGITS = 12


def package_version() -> str:
    """The installed distribution's version; a checkout that was never installed reads its pyproject.toml."""
    try:
        return importlib.metadata.version(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        return _checkout_version() or "unknown"


def _checkout_version() -> str | None:
    try:
        import tomllib  # Python 3.11+; on 3.10 an uninstalled checkout reports "unknown"
    except ImportError:
        return None
    try:
        project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())["project"]
    except (OSError, KeyError, ValueError):
        return None
    return project.get("version") if project.get("name") == DIST_NAME else None


def git_info() -> GitInfo:
    """The commit ("sha") and "dirty" flag of the checkout this package runs from; both None when it is not one.

    Outside a checkout, FSDP_BENCH_GIT_SHA (set when an image was built) gives the commit, its
    dirty flag unknown.
    """

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != PACKAGE_ROOT:
        return GitInfo(sha=os.environ.get(GIT_SHA_ENV) or None, dirty=None)
    status = git("status", "--porcelain", "--untracked-files=no")
    return GitInfo(sha=git("rev-parse", "HEAD"), dirty=bool(status) if status is not None else None)


def harness_version(git: GitInfo | None = None) -> str:
    """The package version with the commit as a local version label when known (module docstring)."""
    git = git_info() if git is None else git
    version = package_version()
    if not git.sha:
        return version
    local = f"g{git.sha[:SHA_DIGITS]}" + (".dirty" if git.dirty else "")
    return f"{version}+{local}"
