"""Where a benchmark runs: this checkout, or another commit's code in a temporary git worktree.

`make bench` measures every benchmark at the committed baseline's own commit too, in the same
sitting (benchmarks/run.py): the VM's speed moves between sittings by as much as the gate's limit,
and only the old code measured now tells drift from a slowdown. A `Checkout` is a folder holding the package and the benchmark scripts; every benchmark
process runs in it (its working directory) with that folder first on PYTHONPATH, so both the
scripts' `import bench` and the timed `python -m bench` load that folder's code, not the editable
install's (PYTHONPATH comes before the install's import hook). The interpreter and its installed
packages are this environment's for both sides: what is compared is the code.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a baseline taken from a checkout with uncommitted changes adds to its commit (run.py commit()).
DIRTY = ".dirty"


class CheckoutError(Exception):
    """Another commit cannot be checked out here (no git, not a repository, an unknown commit):
    one line saying why."""


@dataclass(frozen=True)
class Checkout:
    """A folder with the package and benchmarks/, and what to call it in the output."""

    root: Path
    label: str

    def env(self) -> dict[str, str]:
        """The environment of a benchmark process run in this checkout: its folder first on PYTHONPATH,
        and bytecode cached (where PYTHONDONTWRITEBYTECODE is set, a fresh worktree would compile its
        modules again in every timed command while this checkout's are cached: a bias of its own)."""
        path = os.pathsep.join(filter(None, [str(self.root), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env


HERE = Checkout(ROOT, "this checkout")


def _git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    if shutil.which("git") is None:
        raise CheckoutError("git is not installed")
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd)


def resolve(commit: str) -> str:
    """The full hash of `commit` (a baseline's, ".dirty" dropped), or CheckoutError saying why not."""
    name = commit.removesuffix(DIRTY)
    if not name or name == "unknown":
        raise CheckoutError(f"the baseline names no commit ({commit!r})")
    inside = _git("rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0:
        raise CheckoutError(f"{ROOT} is not a git checkout: {_last_line(inside)}")
    found = _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if found.returncode != 0:
        raise CheckoutError(f"commit {name} is not in this repository (a shallow clone? `git fetch --unshallow`)")
    return found.stdout.strip()


def _last_line(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]


@contextlib.contextmanager
def commit_checkout(commit: str) -> Iterator[Checkout]:
    """`commit`'s tree in a temporary detached worktree, removed afterwards (CheckoutError when it
    cannot be made)."""
    sha = resolve(commit)
    parent = Path(tempfile.mkdtemp(prefix="bench-commit-"))
    folder = parent / sha[:12]
    try:  # the add inside: an interrupt during it leaves no folder nor registered worktree behind
        added = _git("worktree", "add", "--detach", "--quiet", str(folder), sha)
        if added.returncode != 0:
            raise CheckoutError(f"git worktree add {sha[:12]} failed: {_last_line(added)}")
        yield Checkout(folder, f"commit {sha[:12]}")
    finally:
        if folder.exists():
            _git("worktree", "remove", "--force", str(folder))
        shutil.rmtree(parent, ignore_errors=True)
        _git("worktree", "prune")
