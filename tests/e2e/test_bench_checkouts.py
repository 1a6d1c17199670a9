"""`make bench` measures the baseline's commit again in a temporary git worktree (benchmarks/checkouts.py):
a process run in that checkout loads that checkout's code, both checkouts prepare their own data and
take turns run by run, the worktree is gone afterwards, and a commit that cannot be checked out is one
line saying why. Real git, real worktrees of this repository, real benchmark runs at a tiny size."""

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


def test_both_checkouts_are_measured_run_by_run_at_a_tiny_size(harness, tmp_path, capsys):
    run, _ = harness
    import measuring

    def tiny(names, checkouts, runs, folder):
        return measuring.measure(names, checkouts, runs, folder, tiny=True)

    known = {"commit": head()[:12], "benchmarks": {"store_add_10k": {"cpu_s": [1.0], "wall_s": [1.0]}}}
    label, old, new = run.against_commit({"store_add_10k", "check_10k"}, known, 2, tmp_path, tiny)
    assert label == f"commit {head()[:12]}"
    out = capsys.readouterr().out
    # Each checkout prepared its own records once, then the command took turns: A B B A.
    assert f"bench: store_add_10k: 4 timed run(s): ABBA (A: {label}, B: this checkout)" in out
    # check_10k is not in the baseline: measured in this checkout only (it may not exist at the commit).
    assert "bench: check_10k: 2 timed run(s): AA (A: this checkout)" in out
    assert [m.name for m in old] == ["store_add_10k"] and [m.name for m in new] == ["check_10k", "store_add_10k"]
    for m in (*old, *new):
        assert m.failure == "" and len(m.cpu_s) == 2 and len(m.wall_s) == 2 and min(m.cpu_s) > 0
    assert "bench-commit-" not in worktrees()  # the worktree is gone
