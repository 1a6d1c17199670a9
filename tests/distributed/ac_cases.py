"""The activation-checkpointing cases the ranks train (rank_checks.py) and the tests assert on
(test_activation_checkpointing.py): torch-free, so collecting the tests imports no torch."""

from __future__ import annotations

from bench.schema.recipes import STRATEGIES

# (strategy, precision) pairs the checkpointing modes train under: every strategy in fp32, every
# CPU precision under full_shard.
AC_CASES = [(s, "fp32") for s in STRATEGIES] + [("full_shard", p) for p in ("bf16", "bf16_pure", "fp16")]
AC_STEPS = 3
