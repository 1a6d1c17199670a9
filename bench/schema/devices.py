"""Which device a rank runs on, matched against the device table (sweeps/device/*.yaml): one rule
for the parent (bench/config/registry.py reads the table) and the ranks (MFU's peak, which the
launch file carries as `peak_table`). Matched exactly: an "H200 NVL" is not an "H200", and an
unknown device gets no peak rather than another device's."""

from __future__ import annotations

from pydantic import Field

from bench.schema.base import Strict


class PeakEntry(Strict):
    """One device of the table: its preset name, the runtime names it answers to and its peaks."""

    device: str
    match: list[str] = Field(default_factory=list)  # torch.cuda.get_device_name() without "NVIDIA "
    peak_tflops: dict[str, float | None] = Field(default_factory=dict)  # dense TFLOP/s per dtype


def match_peak(table: list[PeakEntry], device_name: str) -> PeakEntry | None:
    """The table's entry for a runtime device name, or None."""
    name = device_name.strip().removeprefix("NVIDIA ").strip()
    return next((entry for entry in table if name in entry.match), None)


def peak_tflops(table: list[PeakEntry], device_name: str, dtype: str) -> tuple[float | None, str | None]:
    """(peak TFLOP/s, None) for a known device, or (None, reason): never another device's peak."""
    entry = match_peak(table, device_name)
    if entry is None:
        return None, f"device '{device_name}' is not in the peak-FLOPs table (sweeps/device/*.yaml)"
    peak = entry.peak_tflops.get(dtype)
    if peak is None:
        return None, f"no {dtype} peak for {entry.device} in the device table"
    return float(peak), None
