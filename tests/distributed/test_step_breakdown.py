"""The profiled steps' split measured on real gloo ranks (engine_checks.profile_report, run inside the
shared ws2 and ws1 launches): each knob moves the part it should, the calls match CommCounter's, the
step range matches the step timer, and a world of one rank has no communication under full_shard.

The ranks share two cores with the rest of the suite: the knobs' effects are asserted against what
they must add, with room for the scheduling noise of a loaded machine (the committed traces of
tests/unit/test_step_split.py hold the same effect to 10 %).
"""

from __future__ import annotations

import statistics

import pytest
from dist_helpers import COMM_DELAY_MS, PROFILE_POINTS_WS2, PROFILED

pytestmark = pytest.mark.ranks

COLLECTIVES = 8  # debug full_shard: 5 all-gathers and 3 reduce-scatters a step
PARTS = ("step_s", "compute_s", "comm_s", "overlapped_comm_s", "exposed_comm_s", "idle_s", "fsdp_s", "barrier_s")


def split(reports: list[dict], label: str, rank: int) -> dict:
    return reports[rank][f"profile/{label}"]["split"]


@pytest.mark.parametrize("label", list(PROFILE_POINTS_WS2))
def test_each_profiled_step_adds_up_and_matches_the_step_timer(ws2_reports, label):
    for rank, report in enumerate(ws2_reports):
        job = report[f"profile/{label}"]
        parts = job["split"]
        assert job["steps"] == PROFILED["profile.steps"] and job["trace"] == f"trace_rank{rank}.json.gz"
        assert job["gzip_bytes"] > 0
        # The profiled steps' losses stay out of the loop's losses (the numerics guard's curves).
        assert job["losses"] == PROFILED["steps"]
        assert all(parts[p] >= 0 for p in PARTS)
        assert parts["compute_s"] + parts["exposed_comm_s"] + parts["idle_s"] == pytest.approx(
            parts["step_s"], rel=0.02
        )
        assert parts["step_s"] == pytest.approx(statistics.median(job["timer_steps_s"]), rel=0.05)


def test_the_calls_per_step_are_the_ones_commcounter_counts(ws2_reports):
    for report in ws2_reports:
        job = report["profile/clean"]
        assert job["counted_calls"] == {"all_gather": 5, "reduce_scatter": 3, "all_reduce": 0}
        assert job["split"]["calls"] == {"all_gather": 5, "reduce_scatter": 3}
        assert job["split"]["overlapped_comm_s"] == 0.0  # FSDP2 on CPU: synchronous collectives


def test_a_late_rank_shows_as_the_others_communication_and_its_own_idle(ws2_reports):
    expected = COLLECTIVES * COMM_DELAY_MS / 1000
    clean0, late0 = split(ws2_reports, "clean", 0), split(ws2_reports, "comm_delay", 0)
    clean1, late1 = split(ws2_reports, "clean", 1), split(ws2_reports, "comm_delay", 1)
    for part in ("comm_s", "exposed_comm_s"):
        assert late0[part] - clean0[part] == pytest.approx(expected, rel=0.3), (clean0, late0)
    assert late1["idle_s"] - clean1["idle_s"] == pytest.approx(expected, rel=0.3), (clean1, late1)
    assert late1["comm_s"] - clean1["comm_s"] < 0.3 * expected, (clean1, late1)


def test_extra_matmuls_raise_compute_and_slow_fraction_raises_idle(ws2_reports):
    """Both ranks do the extra matmuls (more compute, the same collectives) or sleep (slow_fraction=1:
    the step's own time so far, after its work, inside the step's range: idle). On two cores shared with
    the rest of the suite a rank that gets its core late makes its peer wait inside collectives, so
    communication may grow with the extra compute (measured: +67 ms of waiting for +15 ms of matmuls at a
    load average of 6.5): asserted are the compute it adds, the same collectives, and that a sleep goes
    to idle rather than to compute or communication, as long as the work before it."""
    for rank in (0, 1):
        clean, matmuls, slow = (
            split(ws2_reports, label, rank) for label in ("clean", "extra_matmuls", "slow_fraction")
        )
        assert matmuls["calls"] == slow["calls"] == clean["calls"]
        assert matmuls["compute_s"] - clean["compute_s"] > 0.005, (clean, matmuls)
        more_idle = slow["idle_s"] - clean["idle_s"]
        assert more_idle > max(slow["compute_s"] - clean["compute_s"], slow["comm_s"] - clean["comm_s"]), (clean, slow)
        # The sleep lasts as long as the step's work before it, in the same run: compared within the run,
        # since the clean run's communication swings with the load on the cores (27 against 10 ms seen).
        assert slow["idle_s"] > 0.5 * (slow["compute_s"] + slow["exposed_comm_s"]), slow


def test_a_world_of_one_rank(ws1_reports):
    """full_shard on one rank issues no collective at all; no_shard still runs one all-reduce per FSDP
    unit (2 blocks and the root) on its group of one, which CommCounter counts as nothing moved."""
    (report,) = ws1_reports
    full, no_shard = report["profile/full_shard"], report["profile/no_shard"]
    assert full["split"]["calls"] == {} and full["split"]["comm_s"] == 0.0
    assert full["counted_calls"] == {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}
    assert no_shard["split"]["calls"] == {"all_reduce": 3} and no_shard["split"]["comm_s"] > 0
    assert no_shard["counted_calls"] == {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}
