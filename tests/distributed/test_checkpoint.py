"""Checkpoints on real gloo ranks: DCP saves (sync and async) continue bit-exactly, reshard, and never
lose the previous checkpoint; the engine records saves, bytes, load and goodput, and resumes a killed point.

The session's in-rank launch of 2 ranks (conftest.py's ws2_reports runs checkpoint_checks.py) and two
engine launches of one rank share the work. In ranks: `tiny` saves (sync, async) against its local
shards, continuity after a load, hybrid -> full sharding, a failing save. Engine: an uninterrupted
`debug` run with async saves to an fsspec URL and the same training killed at step 3 (first launch);
its resume, the 2-rank in-rank checkpoint resumed on one rank, and `tiny` saves (sync, async) through
the engine (second launch).
"""

from __future__ import annotations

import statistics

import pytest
from dist_helpers import BOOKKEEPING_S, debug_spec, run_engine

from bench.analysis.planner.checkpoint import checkpoint_state_bytes, parameter_tensors
from bench.analysis.planner.workload import workload_from_spec
from bench.schema.protocol import default_checkpoint_dir, point_dir, read_local_marker

pytestmark = pytest.mark.ranks

TOLERANCE = 1e-4  # world size 1 vs 2: floating-point reassociation (tests/distributed/test_numerics.py)
DEBUG_TENSORS = 21  # debug: 2 blocks of 9 parameter tensors, plus embeddings, final norm and output


@pytest.fixture(scope="module")
def rank_reports(ws2_reports) -> list[dict]:
    return ws2_reports  # the session's 2-rank launch runs the checkpoint checks too (conftest.py)


# Engine points (world size 1). `ref` trains 5 steps with an async save after each timed step, to an
# fsspec URL; `killed` is the same training with sync saves and rank 0 failing at step 3 (after the save
# of step 2), in its own folder. `tiny`: one save after the last step, sync and async.
DEBUG = {"steps": 5, "micro_batch": 2, "checkpoint_every": 1}
KILLED = {**DEBUG, "checkpoint": "sync", "debug.fail_rank": 0, "debug.fail_step": 3}


@pytest.fixture(scope="module")
def engine(tmp_path_factory, rank_reports) -> dict:
    results = tmp_path_factory.mktemp("ckpt_engine")
    specs = {
        "ref": debug_spec(**DEBUG, checkpoint="async", checkpoint_dir=(results / "url_ckpt").as_uri()),
        "killed": debug_spec(**KILLED),
        "resumed": debug_spec(**KILLED, resume=True),
        # The in-rank 2-rank run saved after its step 1: one rank resumes it (the same global batch).
        "reshard": debug_spec(
            steps=4, micro_batch=2, resume=True, checkpoint_dir=rank_reports[0]["checkpoint_dirs"]["sync"]
        ),
        "tiny_sync": debug_spec(model="tiny", steps=2, checkpoint="sync"),
        "tiny_async": debug_spec(model="tiny", steps=2, checkpoint="async"),
    }
    killed_dir = default_checkpoint_dir(point_dir(results, specs["killed"]))
    first = run_engine([specs["ref"], specs["killed"]], results)
    marker = read_local_marker(killed_dir)
    second = run_engine([specs[k] for k in ("resumed", "reshard", "tiny_sync", "tiny_async")], results)
    records = {label: second.get(spec.point_id) or first[spec.point_id] for label, spec in specs.items()}
    records["killed"] = first[specs["killed"].point_id]
    return {"results": results, "specs": specs, "records": records, "killed_marker": marker}


# ---- in ranks: DCP through fsdp_core.checkpoint ----


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_loaded_checkpoint_continues_with_the_uninterrupted_losses_bit_exactly(rank_reports, mode):
    for rank, report in enumerate(rank_reports):
        run = report[f"continuity_{mode}"]
        assert run["marker_step"] == run["end_load_step"] == 1
        assert run["continued"] == run["uninterrupted"], f"rank {rank}"
        assert len(run["uninterrupted"]) == 2
        assert run["saves"] == 2  # the second staged into the first's buffers (async): the load proves them
        assert run["staging"] == ("pageable" if mode == "async" else None)  # CPU: DefaultStager, nothing to pin
    save = rank_reports[0][f"continuity_{mode}"]["save"]
    assert (save["staging_s"] is None) == (mode == "sync")
    assert save["durable_s"] > 0 and save["blocked_s"] > 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tiny_saves_the_local_shards_of_params_and_both_adam_moments(rank_reports, mode):
    reports = [r[f"bytes_{mode}"] for r in rank_reports]
    save = reports[0]["save"]
    timings = ("blocked_s", "staging_s", "durable_s", "bookkeeping_s", "write_bytes_per_s")
    assert {k: v for k, v in save.items() if k not in timings} == {
        k: v for k, v in reports[1]["save"].items() if k not in timings
    }  # every rank reads the same DCP metadata
    per_rank, tensors = save["state_bytes_per_rank"], reports[0]["param_tensors"]
    # Each rank writes its shards of the fp32 parameters and of exp_avg and exp_avg_sq (12 bytes per
    # element); DCP writes each replicated 4-byte AdamW step scalar once, on one rank or the other.
    extra = [per_rank[r] - 12 * reports[r]["local_param_numel"] for r in range(2)]
    assert all(e >= 0 and e % 4 == 0 for e in extra), extra
    assert sum(extra) == 4 * tensors == 4 * (4 * 9 + 3)  # tiny: 4 blocks of 9 tensors, plus 3 in the root
    assert sum(per_rank) == 12 * reports[0]["params"] + 4 * tensors
    assert reports[0]["local_param_numel"] + reports[1]["local_param_numel"] == reports[0]["params"]
    # Files: every rank's bytes plus the metadata is what lies on disk; framing adds to the tensors.
    assert save["bytes"] == sum(save["bytes_per_rank"]) + save["metadata_bytes"] == reports[0]["files_on_disk"]
    assert all(f > t for f, t in zip(save["bytes_per_rank"], per_rank))


def test_hybrid_checkpoint_loads_into_full_sharding_bit_identically(rank_reports):
    for report in (r["reshard"] for r in rank_reports):
        assert report["names"] == DEBUG_TENSORS * 4  # parameter, exp_avg, exp_avg_sq and step of each tensor
        assert len(report["equal"]) == report["names"]
        assert report["loaded_placements"] == ["(Shard(dim=0),)"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bookkeeping_after_a_save_is_timed_and_explains_its_part_of_the_window(rank_reports, mode):
    """A listener taking BOOKKEEPING_S per save (2 saves): each save's bookkeeping_s holds it, the
    blocked fraction includes it, and step times + blocked + bookkeeping leave less than one listener
    call of the window unexplained (without bookkeeping_s, two calls would be). The parts are disjoint stretches
    of the window: an async save's blocked time must not hold the previous save's bookkeeping too."""
    report = rank_reports[0][f"bookkeeping_{mode}"]
    section, window = report["section"], report["window_s"]
    saves = section["saves"]
    assert [s["step"] for s in saves] == [2, 3]
    assert all(s["bookkeeping_s"] >= BOOKKEEPING_S for s in saves), saves
    assert section["bookkeeping_s"] == pytest.approx(sum(s["bookkeeping_s"] for s in saves))
    assert section["blocked_fraction"] == pytest.approx((section["blocked_s"] + section["bookkeeping_s"]) / window)
    explained = sum(report["step_times_s"]) + section["blocked_s"] + section["bookkeeping_s"]
    assert window - explained < BOOKKEEPING_S, (window, explained)
    assert explained < window + 0.05, (window, explained)  # 0.05 s: each part is the slowest rank's
    # Goodput: the 2 timed steps' tokens over the window against the step-time median's tokens/s.
    assert section["goodput"] == pytest.approx(2 * statistics.median(report["step_times_s"]) / window)


def test_a_failed_save_keeps_the_previous_checkpoint(rank_reports):
    for rank, report in enumerate(rank_reports):
        run = report["failed_save"]
        assert run["error"] == (
            f"train.checkpoint: the save after step 1 to {run['directory']}/step-00000001 failed "
            "(rank 1: OSError: injected: no space left on device)"
        ), f"rank {rank}"
        assert run["marker_step"] == 0
        assert run["restored"]
        assert not run["step1_metadata"]  # the failed save never completed


# ---- the engine: records, bytes against the planner's closed form, resume and resharding ----


@pytest.mark.parametrize("label", ["tiny_sync", "tiny_async", "ref"])
def test_engine_saves_record_the_closed_form_bytes_load_and_goodput(engine, label):
    spec, rec = engine["specs"][label], engine["records"][label]
    assert rec.status == "ok", rec.error
    ckpt, timed = rec.metrics.checkpoint, spec.train.steps - spec.train.warmup_steps
    every = spec.train.checkpoint_every
    assert (ckpt.mode, ckpt.every) == (spec.train.checkpoint, every or timed)
    assert [s.step for s in ckpt.saves] == list(
        range(spec.train.warmup_steps + (every or timed) - 1, spec.train.steps, every or timed)
    )
    workload = workload_from_spec(spec)
    closed_form = checkpoint_state_bytes(workload)
    assert closed_form == 12 * rec.model_info.params + 4 * parameter_tensors(workload)
    for save in ckpt.saves:
        assert save.state_bytes_per_rank == [closed_form]  # one rank writes everything
        assert save.bytes == sum(save.bytes_per_rank) + save.metadata_bytes
        assert save.write_bytes_per_s == pytest.approx(save.bytes / save.durable_s)
        if spec.train.checkpoint == "async":
            assert save.staging_s is not None and save.staging_s <= save.blocked_s
        else:
            assert save.staging_s is None and save.durable_s <= save.blocked_s
    # Async: staged by DCP's DefaultStager, whose buffers every save reuses (CPU: pageable, nothing to pin).
    assert ckpt.staging == ("pageable" if spec.train.checkpoint == "async" else None)
    # The point's write bandwidth, stored by the ranks: the median of the saves' rates (each took time).
    assert ckpt.write_bytes_per_s == pytest.approx(statistics.median(s.write_bytes_per_s for s in ckpt.saves))
    assert ckpt.load.step == spec.train.steps - 1 and ckpt.load.bytes == ckpt.saves[-1].bytes
    window_tokens_per_s = rec.metrics.tokens_per_step * timed / rec.metrics.timed_window_s
    assert ckpt.tokens_per_s_with_checkpoints == pytest.approx(window_tokens_per_s)
    assert 0 < ckpt.goodput == pytest.approx(window_tokens_per_s / rec.metrics.tokens_per_s)
    assert ckpt.blocked_s == pytest.approx(sum(s.blocked_s for s in ckpt.saves))
    assert ckpt.bookkeeping_s == pytest.approx(sum(s.bookkeeping_s for s in ckpt.saves))
    assert ckpt.blocked_fraction == pytest.approx((ckpt.blocked_s + ckpt.bookkeeping_s) / rec.metrics.timed_window_s)
    assert 0 < ckpt.blocked_fraction < 1
    assert ckpt.resumed is None
    if label == "ref":
        assert ckpt.dir.startswith("file://")  # DCP's fsspec writer
    else:
        folder = default_checkpoint_dir(point_dir(engine["results"], spec))
        assert ckpt.dir == str(folder)
        last = f"step-{spec.train.steps - 1:08d}"
        assert sorted(p.name for p in folder.iterdir()) == ["latest", last]  # older saves pruned


def test_a_killed_point_resumes_from_its_last_checkpoint_with_the_same_losses(engine):
    ref, killed, resumed = (engine["records"][k] for k in ("ref", "killed", "resumed"))
    assert killed.status == "failed"
    assert killed.error == "rank 0: RuntimeError: debug: injected failure on rank 0 at step 3"
    assert engine["killed_marker"].step == 2  # the save after step 2 was complete when rank 0 failed
    assert resumed.point_id == killed.point_id  # the same point, rerun with train.resume=true
    assert resumed.status == "ok", resumed.error
    assert resumed.metrics.checkpoint.resumed.step == 2
    # Bit-exact: the same world size and state (and the uninterrupted run's async saves never touched it).
    assert resumed.metrics.losses == ref.metrics.losses[3:]
    assert [s.step for s in resumed.metrics.checkpoint.saves] == [3, 4]


def test_a_two_rank_checkpoint_resumes_on_one_rank(engine, rank_reports):
    reshard = engine["records"]["reshard"]
    assert reshard.status == "ok", reshard.error
    assert reshard.spec.world_size == 1
    ckpt = reshard.metrics.checkpoint
    assert (ckpt.mode, ckpt.saves, ckpt.load) == ("none", [], None)  # resume only: nothing saved or re-read
    assert ckpt.resumed.step == 1
    # The 2-rank run's steps 2 and 3 after its save, as the engine records them: the mean over ranks.
    two_ranks = [
        statistics.fmean(losses) for losses in zip(*(r["continuity_sync"]["uninterrupted"] for r in rank_reports))
    ]
    assert reshard.metrics.losses == pytest.approx(two_ranks, abs=TOLERANCE)
