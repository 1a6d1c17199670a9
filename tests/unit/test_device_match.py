"""MFU never borrows another device's peak: device names match the device files exactly."""

import pytest

from bench.config.registry import match_device, peak_table
from bench.schema.devices import peak_tflops


@pytest.mark.parametrize(
    ("runtime_name", "device", "bf16_tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm", 989.4),
        ("NVIDIA H200", "h200", 989.4),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb", 312.0),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb", 312.0),
    ],
)
def test_known_devices_get_their_own_peak(runtime_name, device, bf16_tflops):
    assert match_device(runtime_name).device == device
    assert peak_tflops(peak_table(), runtime_name, "bf16") == (bf16_tflops, None)


@pytest.mark.parametrize("runtime_name", ["NVIDIA H200 NVL", "NVIDIA H100 PCIe", "NVIDIA L40S", "cpu (x86_64)"])
def test_other_devices_get_no_peak_and_a_reason(runtime_name):
    assert match_device(runtime_name) is None
    peak, reason = peak_tflops(peak_table(), runtime_name, "bf16")
    assert peak is None and runtime_name in reason and "not in the peak-FLOPs table" in reason


def test_a_dtype_the_device_lacks_is_null_with_a_reason():
    assert peak_tflops(peak_table(), "NVIDIA A100-SXM4-80GB", "fp8") == (
        None,
        "no fp8 peak for a100-80gb in the device table",
    )
