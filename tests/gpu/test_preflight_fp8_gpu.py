"""The preflight's fp8 matmul on a real GPU (marked `gpu`: skipped where no NVIDIA GPU is visible).

What the CPU test cannot show (tests/unit/test_preflight_matmuls.py): torch._scaled_mm's CUDA
kernel accepting the operands as the preflight lays them out (its layout and alignment checks run
for CUDA only) at an fp8 point's own shape, with fast accumulation.
"""

from __future__ import annotations

import pytest

from fsdp_core import preflight as pf

pytestmark = pytest.mark.gpu


def test_fp8_matmuls_run_on_cuda_as_torchao_lays_them_out():
    torch = pytest.importorskip("torch")
    device = torch.device("cuda")
    if torch.cuda.get_device_capability(device) < (8, 9):
        pytest.skip("fp8 needs compute capability >= 8.9")
    m, k, n = 4096, 2048, 5632  # tinyllama's mlp_up at 2 x 2048 tokens
    a, b = pf.matmul_operands(m, k, n, pf.FP8, device)
    out = pf.matmul_op(a, b)()
    assert out.dtype == torch.bfloat16 and out.shape == (m, n)
    exact = a.float() @ b.float()
    # bf16 output and fast accumulation: within a percent of the fp32 product's scale.
    assert (out.float() - exact).abs().max() <= 0.01 * exact.abs().max()
