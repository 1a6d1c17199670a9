"""Activation checkpointing changes memory and time, never the numbers: every mode (bench/schema/ac_modes.py)
trains to the same losses as no checkpointing, on real FSDP2 over gloo, for every strategy (fp32)
and every CPU precision (full_shard), at world size 1 and 2 (the same global batch, same seed).
"""

from __future__ import annotations

import pytest
from ac_cases import AC_CASES, AC_STEPS

from bench.schema.ac_modes import AC_MODES

pytestmark = pytest.mark.ranks

# Recomputation reruns the same kernels on the same inputs: on CPU the losses are bit-identical.
SAME_RUN = 0.0
# World size 1 vs 2: gradients are summed in another order (fp32: 1e-4 as tests/distributed/test_numerics.py;
# bf16/fp16 compute rounds more).
ACROSS_WORLD = {"fp32": 1e-4, "bf16": 2e-2, "bf16_pure": 2e-2, "fp16": 2e-2}


@pytest.mark.parametrize(("strategy", "precision"), AC_CASES)
def test_every_mode_trains_like_no_checkpointing(ws1_reports, ws2_reports, strategy, precision):
    for world, reports in ((1, ws1_reports), (2, ws2_reports)):
        runs = [rank["activation_checkpointing"] for rank in reports]
        assert all(run == runs[0] for run in runs)  # every rank saw the same mean losses
        reference = runs[0][f"{strategy}/{precision}/none"]
        assert len(reference) == AC_STEPS and reference[-1] < reference[0]  # it really trained
        for mode in AC_MODES:
            losses = runs[0][f"{strategy}/{precision}/{mode}"]
            assert losses == pytest.approx(reference, abs=SAME_RUN), (world, mode)


@pytest.mark.parametrize(("strategy", "precision"), AC_CASES)
def test_selective_op_at_world_size_1_and_2_gives_the_same_losses(ws1_reports, ws2_reports, strategy, precision):
    key = f"{strategy}/{precision}/selective_op"
    one, two = ws1_reports[0]["activation_checkpointing"][key], ws2_reports[0]["activation_checkpointing"][key]
    assert one == pytest.approx(two, abs=ACROSS_WORLD[precision])
