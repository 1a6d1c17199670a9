"""Mixed-precision recipes on 2 real ranks: the dtypes that actually flow (fsdp_core/precision.py's table).

Observed, not configured: forward pre-hooks on every Linear see the compute dtype, a dispatch
mode sees the dtype of each all-gather output and reduce-scatter input.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ranks

# precision -> (compute / all-gather dtype, reduce-scatter dtype)
EXPECTED = {
    "fp32": ("float32", "float32"),
    "bf16": ("bfloat16", "float32"),
    "bf16_pure": ("bfloat16", "bfloat16"),
    "fp16": ("float16", "float32"),
}


@pytest.mark.parametrize("precision", list(EXPECTED))
def test_precision_dtypes(ws2_reports, precision):
    compute, reduce = EXPECTED[precision]
    for rank in ws2_reports:
        report = rank[precision]
        assert report["linear_input"] == [compute]
        assert report["linear_weight"] == [compute]
        assert report["logits"] == compute
        assert report["collectives"] == {"all_gather": [compute], "reduce_scatter": [reduce], "all_reduce": []}
        # Master weights and the gradients the optimizer sees stay fp32 in every recipe.
        assert report["sharded_params"] == ["float32"]
        assert report["grads"] == ["float32"]
