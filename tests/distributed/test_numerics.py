"""Numerics: world size 1 and world size 2 train identically on the same global batch (fp32).

World size 1 with micro_batch=2 and world size 2 with micro_batch=1 see the same 2 rows per
step (fsdp_core/data.py seeds each global row), start from the same weights (materialize()
generates every full parameter from its name) and average gradients the same way, so the
three losses agree up to floating-point reassociation.
"""

from __future__ import annotations

import pytest
from dist_helpers import STRATEGIES

pytestmark = pytest.mark.ranks

TOLERANCE = 1e-4


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_world_size_1_and_2_give_the_same_losses(engine_records, strategy):
    one, two = engine_records[f"{strategy}/ws1"], engine_records[f"{strategy}/ws2"]
    assert (one.status, two.status) == ("ok", "ok"), (one.error, two.error)
    assert (one.spec.world_size, two.spec.world_size) == (1, 2)
    assert one.metrics.tokens_per_step == two.metrics.tokens_per_step == 2 * 32
    assert len(one.metrics.losses) == len(two.metrics.losses) == 3
    for step, (a, b) in enumerate(zip(one.metrics.losses, two.metrics.losses)):
        assert abs(a - b) < TOLERANCE, f"step {step}: world size 1 loss {a} vs world size 2 loss {b}"
    assert one.metrics.losses[-1] < one.metrics.losses[0]  # the optimizer really stepped


def test_every_strategy_matches_at_world_size_1(engine_records):
    reference = engine_records["full_shard/ws1"].metrics.losses
    for strategy in STRATEGIES:
        losses = engine_records[f"{strategy}/ws1"].metrics.losses
        assert losses == pytest.approx(reference, abs=TOLERANCE), strategy
