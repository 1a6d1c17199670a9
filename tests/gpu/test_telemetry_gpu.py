"""Telemetry's NVML path on a real GPU (marked `gpu`: skipped where no NVIDIA GPU is visible).

What the CPU tests cannot show: nvidia-ml-py against a real driver, the device found by the UUID
CUDA gives it, the energy counter over a real timed window (about 2 s: long enough for its update
period) and how often it updates, and energy per token in a record.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

from fsdp_core import telemetry as tm
from fsdp_core import telemetry_readers as rd

pytestmark = pytest.mark.gpu


def test_nvml_readers_sample_the_gpu():
    torch = pytest.importorskip("torch")
    props = torch.cuda.get_device_properties(0)
    readers = rd.build_readers("cuda", 1, {"uuid": str(props.uuid)})
    sources = {r.source for r in readers.readers}
    assert {"nvml.utilization", "nvml.memory", "nvml.power", "nvml.energy"} <= sources, readers.missing
    sampler = tm.Sampler(20, readers, {"rank": 0, "host": "here", "device": "cuda:0"})
    x = torch.randn(4096, 4096, device="cuda")
    sampler.start()
    # 2 s: NVML's energy counter updates every ~100 ms or slower, so a shorter loop may not see it move.
    deadline = time.perf_counter() + 2.0
    while time.perf_counter() < deadline:
        x = x @ x
        x = x / x.norm()
    torch.cuda.synchronize()
    series = sampler.stop()
    columns = series["columns"]
    energy = [v for v in columns["gpu_energy_j"] if v is not None]
    assert len(energy) >= 5 and energy == sorted(energy) and energy[-1] > energy[0]
    assert all(0 <= v <= 100 for v in columns["util_pct"] if v is not None)
    assert max(v for v in columns["gpu_mem_used_bytes"] if v is not None) > 4096 * 4096 * 4
    assert all(50 < v < 2000 for v in columns["gpu_power_w"] if v is not None)  # watts, not milliwatts


def _cluster() -> str:
    import subprocess

    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return "h200-8x" if "H200" in name.stdout else "a100-8x" if "A100" in name.stdout else "h100-8x"


# `debug` steps are launch-bound (a few ms on an H200): 400 timed steps make a window of about 2 s or
# more, long enough for NVML's energy counter (it updates every ~100 ms or slower) to advance.
STEPS, WARMUP = 402, 2


def test_a_gpu_point_records_energy_per_token(fsdp_bench, tmp_path):
    rc, out, err, records = fsdp_bench(
        "run", "model=debug", "precision=bf16", f"cluster={_cluster()}", f"train.steps={STEPS}",
        f"train.warmup_steps={WARMUP}", f"results_dir={tmp_path}", results=tmp_path,
    )  # fmt: skip
    assert rc == 0, out + err
    (record,) = records
    t = record.metrics.telemetry
    assert t.energy_source == "gpu" and t.energy_per_token_j > 0 and t.avg_power_w_per_device > 0, t.missing
    assert "gpu_energy_j" not in t.missing  # the counter advanced over this window
    timed = STEPS - WARMUP
    assert t.energy_j == pytest.approx(t.energy_per_token_j * record.metrics.tokens_per_step * timed)
    assert {"gpu_power_w", "gpu_energy_j", "gpu_mem_used_bytes", "util_pct"} <= set(t.signals)
    assert t.throttle_fraction is not None
    series = pd.read_parquet(tmp_path / record.sweep / record.point_id / t.sidecar)
    assert series["gpu_energy_j"].notna().sum() >= 2


def test_the_energy_counter_updates_within_a_fraction_of_a_second():
    torch = pytest.importorskip("torch")
    line = rd.nvml_energy_update_period({"uuid": str(torch.cuda.get_device_properties(0).uuid)}, seconds=1.0)
    assert line.startswith("NVML energy counter updates every ~"), line
    period_ms = float(line.split("~")[1].split(" ms")[0])
    assert 0 < period_ms <= 500  # the windows of the GPU check (>= 2 s) then see several updates
