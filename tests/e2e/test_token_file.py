"""`train.data=<token file>`: real windows of a memmapped token file train the model; bad paths are refused."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def token_runs(tmp_path_factory, fsdp_bench):
    """The same 3 steps on one token file by 1 rank (micro-batch 2) and by 2 ranks (micro-batch 1):
    (the token file, the 1-rank run's results folder, both runs)."""
    root = tmp_path_factory.mktemp("token_file")
    # A learnable stream (a repeating ramp), uint16 as the default token-file dtype.
    tokens = (np.arange(50_000) % 97).astype(np.uint16)
    path = root / "tokens.bin"
    tokens.tofile(path)
    common = ("model=debug", f"train.data={path}", "train.seq_len=32", "train.steps=3", "train.warmup_steps=1")
    one = fsdp_bench("run", *common, "train.micro_batch=2", f"results_dir={root / 'w1'}", results=root / "w1")
    # Two ranks under one torchrun agent: the world size, not the node count, splits the batch.
    two = fsdp_bench("run", *common, "gpus_per_node=2", f"results_dir={root / 'w2'}", results=root / "w2")
    return path, root / "w1", (one, two)


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_token_file_trains_and_is_deterministic_across_world_sizes(token_runs):
    path, _, (run1, run2) = token_runs
    assert run1.rc == 0 and run2.rc == 0, run1.stdout + run1.stderr + run2.stdout + run2.stderr
    (one,), (two,) = run1.records, run2.records
    assert one.spec.train.data == str(path) and one.status == "ok"
    # Same global batch (2 rows), split differently: same losses (windows are seeded per global row).
    assert [round(x, 4) for x in one.metrics.losses] == [round(x, 4) for x in two.metrics.losses]


def test_missing_token_file_is_refused_before_launch(tmp_path, fsdp_bench):
    rc, out, err, records = fsdp_bench(
        "run",
        "model=debug",
        f"train.data={tmp_path}/nope.bin",
        f"results_dir={tmp_path / 'r'}",
        results=tmp_path / "r",
        separate=False,  # refused before anything launches: in this process
    )
    assert rc == 2
    assert f"train.data: token file {tmp_path}/nope.bin does not exist" in err
    assert records == [] and not (tmp_path / "r").exists()


@pytest.mark.ranks
def test_record_stays_readable_after_its_token_file_is_gone(token_runs):
    from bench.analysis.records import load_records

    path, results, (run, _) = token_runs
    assert run.rc == 0, run.stdout + run.stderr
    path.unlink()  # the last test of the file to read it
    records, problems = load_records(results)
    assert problems == [] and [r.status for r in records] == ["ok"]
