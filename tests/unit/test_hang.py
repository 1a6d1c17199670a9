"""The hang verdict (bench/analysis/hang.py) on real Flight Recorder dumps of the engine's two hangs,
committed under tests/fixtures/flight_recorder/ (2 gloo ranks, `debug`, full_shard,
`debug.fail_rank=1 debug.hang=true`, fsdp_core/flight_recorder.py's dumps on the launcher's SIGTERM):

- warmup_all_gather: `debug.fail_step=0`, a warm-up step: rank 0 blocks in FSDP's first all-gather;
- timed_barrier: `debug.fail_step=1`, the first timed step: rank 0 blocks in the step timer's barrier.

Cross-checked against torch's own analyzer (`torchfrtrace`), which needs the groups filled in.
"""

from __future__ import annotations

import gc
import json
import pickle
import shutil
from pathlib import Path

import pytest

from bench.analysis.hang import meaning, verdict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder"


def test_warmup_hang_names_fsdps_all_gather_and_the_missing_rank():
    hang = verdict(FIXTURES / "warmup_all_gather")
    c = hang.collective
    assert (c.kind, c.seq, c.group, c.group_desc, c.group_ranks) == ("gloo:all_gather", 1, "0", "default_pg", [0, 1])
    assert (c.input_sizes, c.output_sizes) == ([[32800]], [[2, 32800]])
    assert c.meaning == "FSDP's all-gather in forward of step 0"
    assert hang.entered == [0]
    assert [(m.rank, m.last, m.doing) for m in hang.missing] == [(1, None, "debug.hang of step 0")]
    assert hang.summary == (
        "hung: rank 1 never entered collective 1 of default_pg (gloo:all_gather: FSDP's all-gather in forward "
        "of step 0), which rank 0 entered; rank 1's last collective: none in this point, it was in debug.hang of step 0"
    )


def test_timed_hang_names_the_step_timers_barrier():
    hang = verdict(FIXTURES / "timed_barrier")
    c = hang.collective
    assert (c.kind, c.seq, c.meaning) == ("gloo:barrier", 9, "the step timer's opening barrier of step 1")
    assert hang.entered == [0] and hang.dumped_ranks == [0, 1]
    (missing,) = hang.missing
    assert (missing.rank, missing.last.kind, missing.last.seq) == (1, "gloo:all_reduce", 8)
    assert hang.summary.startswith(
        "hung: rank 1 never entered collective 9 of default_pg (gloo:barrier: the step timer's opening barrier "
        "of step 1), which rank 0 entered; rank 1's last collective: 8 gloo:all_reduce"
    )


def test_earlier_points_collectives_do_not_count(tmp_path):
    """A launch's buffer holds earlier points' collectives: entries created before the point started are
    dropped, so a point that issued none is read as nothing pending in it."""
    shutil.copytree(FIXTURES / "timed_barrier", tmp_path / "p")
    for path in (tmp_path / "p" / "flight_recorder").glob("rank*.json"):
        dump = json.loads(path.read_text())
        dump["point_started_ns"] = max(e["time_created_ns"] for e in dump["trace"]["entries"]) + 1
        path.write_text(json.dumps(dump))
    hang = verdict(tmp_path / "p")
    assert hang.collective is None and hang.missing == []
    assert hang.summary.startswith("hung outside any collective (none was pending): rank 0's last collective: none")


def test_one_rank_that_hung_outside_a_collective(tmp_path):
    """As under Slurm's one-rank hanging point: nothing pending, the rank's last collective named."""
    (tmp_path / "p" / "flight_recorder").mkdir(parents=True)
    dump = json.loads((FIXTURES / "timed_barrier" / "flight_recorder" / "rank1.json").read_text())
    dump["groups"]["0"]["ranks"], dump["world_size"] = [1], 1  # its group of one
    (tmp_path / "p" / "flight_recorder" / "rank1.json").write_text(json.dumps(dump))
    hang = verdict(tmp_path / "p")
    assert hang.collective is None
    assert hang.summary == (
        "hung outside any collective (none was pending): rank 1's last collective: 8 gloo:all_reduce, "
        "it was in debug.hang of step 1"
    )


def test_a_rank_without_a_dump_is_named_as_such(tmp_path):
    """Rank 0's dump is lost (killed first): rank 1 is the one that entered collective 8, rank 0 is
    named missing with no dump, never silently dropped."""
    (tmp_path / "p" / "flight_recorder").mkdir(parents=True)
    shutil.copy(FIXTURES / "timed_barrier" / "flight_recorder" / "rank1.json", tmp_path / "p" / "flight_recorder")
    hang = verdict(tmp_path / "p")
    assert (hang.collective.seq, hang.entered, hang.dumped_ranks) == (8, [1], [1])
    assert [(m.rank, m.doing) for m in hang.missing] == [(0, "no dump from this rank")]


def test_no_dump_says_why(tmp_path):
    hang = verdict(tmp_path)
    assert hang.collective is None and hang.summary == ""
    assert hang.unavailable.startswith("no Flight Recorder dump")


def test_fsdps_reduce_scatter_is_named_as_such():
    assert meaning("gloo:all_reduce", "backward of step 2") == (
        "FSDP's reduce-scatter (gloo records it as all_reduce) in backward of step 2"
    )
    assert meaning("gloo:barrier", "the step timer's closing barrier of step 3") == (
        "the step timer's closing barrier of step 3"
    )


@pytest.mark.parametrize(
    ("case", "seq", "kind"), [("warmup_all_gather", 1, "gloo:all_gather"), ("timed_barrier", 9, "gloo:barrier")]
)
def test_torchs_analyzer_agrees(tmp_path, case, seq, kind):
    """torchfrtrace on the same dumps, its empty gloo `pg_config` filled from the dump's groups: its last
    collective's missing ranks are the verdict's."""
    fr_trace = pytest.importorskip("torch.distributed.flight_recorder.fr_trace")
    for path in sorted((FIXTURES / case / "flight_recorder").glob("rank*.json")):
        dump = json.loads(path.read_text())
        trace = {"entries": [], **dump["trace"]}
        trace["pg_config"] = {
            name: {"name": name, "desc": group["desc"], "ranks": json.dumps(group["ranks"])}
            for name, group in dump["groups"].items()
        }
        (tmp_path / f"fr_dump_{dump['rank']}").write_bytes(pickle.dumps(trace))
    out = tmp_path / "db.pickle"
    collecting = gc.isenabled()
    try:
        fr_trace.main([str(tmp_path), "--prefix", "fr_dump_", "-o", str(out)])
    finally:  # its loader turns the cyclic collector off and leaves it off
        if collecting:
            gc.enable()
    _, db = pickle.loads(out.read_bytes())
    last = db.collectives[-1]
    hang = verdict(FIXTURES / case)
    assert (last.collective_seq_id, last.collective_name) == (seq, kind) == (hang.collective.seq, hang.collective.kind)
    assert last.missing_ranks == {m.rank for m in hang.missing} == {1}
