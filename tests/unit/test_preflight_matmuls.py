"""What a preflight times is what the point runs (fsdp_core/preflight.py): fp8 matmuls for the linears
an fp8 point converts, as torchao calls torch._scaled_mm, and reduce-scatters up to the fp32
gradients of the largest FSDP unit. torch._scaled_mm runs on CPU in torch 2.13 (its CUDA layout
checks do not: they are asserted here); the GPU rate itself shows in the GPU check."""

from __future__ import annotations

import pytest
import torch

from bench.analysis.preflight import from_measurements
from bench.config.compose import flavors, spec_from_fields
from bench.schema.options import PreflightSettings
from bench.schema.preflight import MatmulTiming, PreflightMeasurements, RankMeasurements
from bench.schema.recipes import FP8_ALIGNMENT
from fsdp_core import preflight as pf

MODELS = flavors()


def test_an_fp8_point_times_its_converted_linears_in_fp8():
    def dtypes(model: str, precision: str) -> dict[str, torch.dtype]:
        shapes = pf.gemm_shapes(MODELS[model], 4096)
        return {name: pf.matmul_dtype(name, k, n, precision) for name, (_, k, n) in shapes.items()}

    # tinyllama: every block linear is aligned to 16; the output projection stays bf16.
    assert dtypes("tinyllama-1.1b", "fp8") == {
        "attn_qo": pf.FP8, "attn_kv": pf.FP8, "mlp_up": pf.FP8, "mlp_down": pf.FP8, "output": torch.bfloat16,
    }  # fmt: skip
    # debug: ffn_dim 172 is not a multiple of 16, so its MLP runs bf16 (fsdp_core/precision.py's filter).
    assert dtypes("debug", "fp8") == {
        "attn_qo": pf.FP8, "attn_kv": pf.FP8, "mlp_up": torch.bfloat16, "mlp_down": torch.bfloat16,
        "output": torch.bfloat16,
    }  # fmt: skip
    assert set(dtypes("tinyllama-1.1b", "bf16").values()) == {torch.bfloat16}
    assert set(dtypes("tinyllama-1.1b", "fp16").values()) == {torch.float16}


def test_the_fp8_matmul_is_torchaos_scaled_mm_with_a_column_major_weight():
    m, k, n = 32, 64, 48
    torch.manual_seed(0)
    a, b = pf.matmul_operands(m, k, n, pf.FP8, torch.device("cpu"))
    # What torch._scaled_mm demands on CUDA (not checked by its CPU kernel): fp8 operands, a
    # row-major input, a column-major weight, k and n multiples of 16.
    assert (a.dtype, b.dtype, a.shape, b.shape) == (pf.FP8, pf.FP8, (m, k), (k, n))
    assert a.stride() == (k, 1) and b.stride() == (1, k)
    assert k % FP8_ALIGNMENT == 0 and n % FP8_ALIGNMENT == 0
    out = pf.matmul_op(a, b)()
    assert out.dtype == torch.bfloat16 and out.shape == (m, n)
    exact = a.float() @ b.float()  # unit scales: the product of the fp8 values
    assert torch.allclose(out.float(), exact, rtol=2**-8, atol=1e-3)  # bf16's rounding of the fp32 product
    plain_a, plain_b = pf.matmul_operands(m, k, n, torch.bfloat16, torch.device("cpu"))
    assert plain_b.stride() == (n, 1)
    assert torch.equal(pf.matmul_op(plain_a, plain_b)(), torch.mm(plain_a, plain_b))


def test_reduce_scatter_sizes_reach_the_fp32_gradients_of_the_largest_unit():
    model = MODELS["tinyllama-1.1b"]
    units = max(model.block_params, 2 * model.vocab_size * model.dim + model.dim)
    # bf16 and fp8 gather 2 bytes an element but reduce-scatter fp32 gradients: 4 bytes.
    assert pf.largest_unit_bytes(model, "bf16") == units * 4
    assert pf.largest_unit_bytes(model, "fp8") == units * 4
    assert pf.largest_unit_bytes(model, "fp32") == units * 4
    assert pf.largest_unit_bytes(model, "bf16_pure") == units * 2  # bf16 reductions too
    assert pf.message_sizes(1024, pf.largest_unit_bytes(model, "bf16"))[-1] == units * 4


def test_the_record_says_which_shapes_ran_in_fp8():
    spec = spec_from_fields(model="debug", precision="fp8", cluster="h200-8x", launcher="local")
    shapes = pf.gemm_shapes(spec.model, 64)
    timings = {
        name: MatmulTiming(
            seconds=[1e-3, 1e-3], flops=2.0 * m * k * n, shape=[m, k, n],
            dtype=str(pf.matmul_dtype(name, k, n, "fp8")).removeprefix("torch."),
        )
        for name, (m, k, n) in shapes.items()
    }  # fmt: skip
    raw = PreflightMeasurements(ranks=[RankMeasurements(rank=0, host="h", local_rank=0, node=0, matmul=timings)])
    record = from_measurements(raw, spec, PreflightSettings(), ["full_shard"])
    (rank,) = record.ranks
    assert rank.matmul_dtype_by_shape == {
        "attn_qo": "float8_e4m3fn", "attn_kv": "float8_e4m3fn", "mlp_up": "bfloat16", "mlp_down": "bfloat16",
        "output": "bfloat16",
    }  # fmt: skip
    assert record.notes["matmul"].startswith("fp8 (torch._scaled_mm, as torchao's Float8Linear) for attn_kv, attn_qo;")
    # Measurements written before the dtype was recorded still read, and say nothing about it.
    old = MatmulTiming.model_validate({"seconds": [1e-3], "flops": 1.0, "shape": [1, 1, 1]})
    assert old.dtype is None
    assert pytest.approx(rank.matmul_tflops) == sum(t.flops for t in timings.values()) / 5e-3 / 1e12
