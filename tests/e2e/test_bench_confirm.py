"""`make bench` measures the baseline's commit again in a temporary git worktree (benchmarks/checkouts.py):
a process run in that checkout loads that checkout's code, the worktree is gone afterwards, and a
commit that cannot be checked out is one line saying why. Real git, real worktrees of this repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0,
    reason="needs this repository's git history",
)


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import checkouts
        import run

        yield run, checkouts
    finally:
        sys.path.remove(str(BENCHMARKS))


def head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def worktrees() -> str:
    return subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout


def test_a_process_in_a_commit_checkout_runs_that_commits_code(harness):
    _, checkouts = harness
    sha = head()
    with checkouts.commit_checkout(sha[:12] + ".dirty") as then:  # a baseline taken from a modified tree
        assert then.label == f"commit {sha[:12]}" and then.root != ROOT
        assert (then.root / "benchmarks" / "run.py").is_file()
        assert str(then.root) in worktrees()
        probe = "import bench, benchmarks_probe; print(bench.__file__)"
        (then.root / "benchmarks_probe.py").write_text("")  # found only on the worktree's path
        proc = subprocess.run(
            [sys.executable, "-c", probe], cwd=then.root, env=then.env(), capture_output=True, text=True, check=True
        )
        assert Path(proc.stdout.strip()) == then.root / "bench" / "__init__.py"
        # The timed command line, `python -m bench ...`, resolves the package in the worktree too.
        (then.root / "bench" / "where_probe.py").write_text("print(__file__)\n")
        proc = subprocess.run(
            [sys.executable, "-m", "bench.where_probe"], cwd=then.root, env=then.env(), capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        assert Path(proc.stdout.strip()) == then.root / "bench" / "where_probe.py"
    assert not then.root.exists() and str(then.root) not in worktrees()


def test_an_unknown_commit_is_one_line(harness):
    _, checkouts = harness
    with pytest.raises(checkouts.CheckoutError) as error:
        with checkouts.commit_checkout("0123456789ab"):
            pass
    assert (
        str(error.value) == "commit 0123456789ab is not in this repository (a shallow clone? `git fetch --unshallow`)"
    )


def test_the_commit_and_this_checkout_are_measured_abba_and_judged(harness, capsys):
    run, _ = harness
    seen = []

    def measure_in(groups, runs, smoke, checkout, pytest_runs):
        seen.append(checkout.label)
        old = checkout is not run.HERE
        cpu = [4.0 + 0.01 * i for i in range(runs)] if old else [5.6 + 0.01 * i for i in range(runs)]
        return [run.Measured.of("store_add_10k", list(cpu), list(cpu))]

    label, old, new = run.against_commit(["store_add_10k"], {"commit": head()[:12]}, 6, measure_in)
    assert label == f"commit {head()[:12]}" and seen == [label, "this checkout", "this checkout", label]
    result = run.judged_now(label, old, new)
    assert list(result.regressed) == ["store_add_10k"]
    assert result.failures[0].startswith(f"store_add_10k is 39.9% slower than {label} in CPU time (4.01 s -> 5.61 s")
    assert (
        f"bench: measuring {label} (a git worktree) and this checkout in this sitting, ABBA" in capsys.readouterr().out
    )
    assert "bench-commit-" not in worktrees()  # the worktree is gone
