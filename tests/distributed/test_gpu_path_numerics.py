"""GPU-path numerics that real CPU ranks can check: fp16 overflow agreement, block input dtypes, functional comms.

The session's launch of 2 gloo ranks (conftest.py's ws2_reports) runs every check (numerics_checks.py);
the tests assert on the reports.
"""

from __future__ import annotations

import pytest
from dist_helpers import BLOCK_PRECISIONS

from bench.config.compose import flavors

pytestmark = pytest.mark.ranks

ARGS = flavors()["debug"]
WORLD = 2
F32 = 4
INIT_SCALE = 2.0**16  # ShardedGradScaler's default, as fsdp_core.precision.build_grad_scaler builds it


@pytest.fixture(scope="module")
def reports(ws2_reports) -> list[dict]:
    return ws2_reports  # the session's 2-rank launch runs these checks too (conftest.py)


# 1. fp16 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("optimizer", ["fused", "foreach"])
def test_fp16_overflow_on_one_rank_skips_the_step_on_every_rank(reports, optimizer):
    """An inf in rank 0's gradient shard only: every rank skips the step and halves its scale.

    Fused AdamW takes GradScaler.step's other branch (no unscale_, so no ShardedGradScaler
    all-reduce): the ranks must still agree, or they would drift apart silently.
    """
    per_rank = [r[f"fp16_{optimizer}"] for r in reports]
    assert [r["optimizer_handles_scaling"] for r in per_rank] == [optimizer == "fused"] * WORLD
    assert {r["scaler"] for r in per_rank} == {"ShardedGradScaler"}
    for rank, report in enumerate(per_rank):
        clean, overflow = report["clean"], report["overflow_on_rank0"]
        # Control: without injection the fp16 gradients are finite and every parameter shard moves.
        assert clean["grads_finite_before_injection"] is True
        assert clean["params_changed"] == clean["params"] > 0
        assert (clean["scale_before"], clean["scale_after"]) == (INIT_SCALE, INIT_SCALE)
        # The inf sits on rank 0 only ...
        assert overflow["grads_finite_before_injection"] is True
        assert overflow["grads_finite_after_injection"] is (rank != 0)
        # ... yet every rank skips the step and backs off its scale.
        assert overflow["params_changed"] == 0, f"rank {rank} stepped despite rank 0's overflow"
        assert (overflow["scale_before"], overflow["scale_after"]) == (INIT_SCALE, INIT_SCALE / 2), f"rank {rank}"


def test_fp16_found_inf_agreement_collectives(reports):
    """Which collective carries the flag: DTensor's handler of the non-finite check all-reduces it
    (functional, 4 bytes), and only unscale_ (foreach) adds ShardedGradScaler's own (c10d, 4 bytes)."""
    for rank in reports:
        for step in ("clean", "overflow_on_rank0"):
            fused, foreach = rank["fp16_fused"][step], rank["fp16_foreach"][step]
            assert fused["step_comm_bytes"] == {"all_gather": 0, "reduce_scatter": 0, "all_reduce": F32}
            assert fused["step_comm_calls"] == {"all_reduce": 1}
            assert foreach["step_comm_bytes"] == {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 2 * F32}
            assert foreach["step_comm_calls"] == {"all_reduce": 2}


def test_the_timed_loop_counts_the_steps_the_scaler_skipped(reports):
    """metrics.scaler_skipped_steps as the engine's loop counts it: every timed step of an overflowing
    run (its scale backed off each step, no parameter moved), none of a clean run, no count without a
    scaler; the same count on every rank."""
    for report in reports:
        overflow, clean, fp32 = report["skips/overflow"], report["skips/clean"], report["skips/fp32"]
        assert overflow["timed"] == clean["timed"] == 3
        assert (overflow["skipped"], overflow["params_changed"]) == (3, 0)
        assert overflow["scale_after"] == 2.0**40 / 2**5  # 2 warm-up + 3 timed steps, each skipped
        assert clean["skipped"] == 0 and clean["params_changed"] > 0 and clean["scale_after"] == 1.0
        assert (fp32["has_count"], fp32["skipped"], fp32["scale_after"]) == (False, None, None)


# 2. RoPE stays fp32 -------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", list(BLOCK_PRECISIONS))
def test_blocks_get_compute_dtype_activations_and_fp32_rope(reports, precision):
    for rank in reports:
        report = rank[f"blocks/{precision}"]
        assert report["hook_calls"] == ARGS.n_layers
        assert report["activation"] == [BLOCK_PRECISIONS[precision]]
        assert report["rope"] == ["float32"], "FSDP2 cast the rotary table to the compute dtype"
        assert report["loss_finite"] is True


def test_rope_stays_fp32_in_activation_checkpoint_recompute(reports):
    for rank in reports:
        report = rank["blocks/bf16/ac_full"]
        assert report["hook_calls"] == 2 * ARGS.n_layers  # forward, then the recompute in backward
        assert (report["activation"], report["rope"]) == (["bfloat16"], ["float32"])


# 4. Functional collectives ------------------------------------------------------------------------


def comm(all_gather: int = 0, reduce_scatter: int = 0, all_reduce: int = 0) -> dict[str, int]:
    return {"all_gather": all_gather, "reduce_scatter": reduce_scatter, "all_reduce": all_reduce}


# case -> (bytes, calls): all-gathers count their output (input x group size), reduce-scatters
# their input, all-reduces their tensor; every tensor is float32.
EXPECTED_COMM = {
    "funcol_all_reduce_10": (comm(all_reduce=10 * F32), {"all_reduce": 1}),
    "funcol_all_gather_6": (comm(all_gather=6 * F32 * WORLD), {"all_gather": 1}),
    "funcol_reduce_scatter_8": (comm(reduce_scatter=8 * F32), {"reduce_scatter": 1}),
    "funcol_all_reduce_coalesced_3_5": (comm(all_reduce=(3 + 5) * F32), {"all_reduce": 1}),
    "funcol_all_gather_coalesced_7_9": (comm(all_gather=(7 + 9) * F32 * WORLD), {"all_gather": 1}),
    "funcol_reduce_scatter_coalesced_4_12": (comm(reduce_scatter=(4 + 12) * F32), {"reduce_scatter": 1}),
    "op_all_reduce__11": (comm(all_reduce=11 * F32), {"all_reduce": 1}),
    "op_all_reduce_coalesced__13_2": (comm(all_reduce=(13 + 2) * F32), {"all_reduce": 1}),
    "op_all_gather_out_15": (comm(all_gather=15 * F32 * WORLD), {"all_gather": 1}),
    "op_reduce_scatter_out_14": (comm(reduce_scatter=14 * F32), {"reduce_scatter": 1}),
    "single_rank_group": (comm(), {}),
    # Global (4·world, 4) fp32: the all-gather's output is the whole tensor.
    "dtensor_shard0_to_replicate": (comm(all_gather=4 * WORLD * 4 * F32), {"all_gather": 1}),
    "dtensor_amax_clamp_2": (comm(all_reduce=2 * F32), {"all_reduce": 1}),
    "c10d_all_reduce_12_and_funcol_all_reduce_10": (comm(all_reduce=(12 + 10) * F32), {"all_reduce": 2}),
}


@pytest.mark.parametrize("case", list(EXPECTED_COMM))
def test_functional_collectives_are_counted(reports, case):
    expected_bytes, expected_calls = EXPECTED_COMM[case]
    for rank in reports:
        counted = rank["comm"]["cases"][case]
        assert (counted["bytes"], counted["calls"]) == (expected_bytes, expected_calls)


def test_every_functional_case_is_checked(reports):
    assert set(reports[0]["comm"]["cases"]) == set(EXPECTED_COMM)
    for rank in reports:
        # The amax really was reduced over ranks: replicated, the global maximum.
        assert rank["comm"]["amax_placements"] == ["Replicate"]
        assert rank["comm"]["amax_value"] == 16.0 * WORLD - 1
