"""`train.data=<token file>`: real windows of a memmapped token file train the model; bad paths are refused."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_token_file_trains_and_is_deterministic_across_world_sizes(tmp_path, fsdp_bench):
    # A learnable stream (a repeating ramp), uint16 as the default token-file dtype.
    tokens = (np.arange(50_000) % 97).astype(np.uint16)
    path = tmp_path / "tokens.bin"
    tokens.tofile(path)
    common = ("model=debug", f"train.data={path}", "train.seq_len=32", "train.steps=3", "train.warmup_steps=1")
    rc1, out1, err1, recs1 = fsdp_bench(
        "run", *common, "train.micro_batch=2", f"results_dir={tmp_path / 'w1'}", results=tmp_path / "w1"
    )
    # Two ranks under one torchrun agent: the world size, not the node count, splits the batch.
    rc2, out2, err2, recs2 = fsdp_bench(
        "run", *common, "gpus_per_node=2", f"results_dir={tmp_path / 'w2'}", results=tmp_path / "w2"
    )
    assert rc1 == 0 and rc2 == 0, out1 + err1 + out2 + err2
    (one,), (two,) = recs1, recs2
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
def test_record_stays_readable_after_its_token_file_is_gone(tmp_path, fsdp_bench):
    from bench.analysis.records import load_records

    path = tmp_path / "tokens.bin"
    (np.arange(5_000) % 97).astype(np.uint16).tofile(path)
    results = tmp_path / "r"
    rc, out, err, _ = fsdp_bench(
        "run",
        "model=debug",
        f"train.data={path}",
        "train.seq_len=32",
        "train.steps=2",
        "train.warmup_steps=1",
        f"results_dir={results}",
        results=results,
    )
    assert rc == 0, out + err
    path.unlink()
    records, problems = load_records(results)
    assert problems == [] and [r.status for r in records] == ["ok"]
