"""The engine on a real CUDA GPU (marked `gpu`: skipped where no NVIDIA GPU is visible).

What CPU tests cannot show: NCCL, CUDA events, the caching allocator's statistics, bf16 on
tensor cores, and one GPU per rank from the local launcher.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.gpu


def _gpus() -> int:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if shutil.which("nvidia-smi") else None
    return len(out.stdout.splitlines()) if out and out.returncode == 0 else 0


def _cluster() -> str:
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return "h200-8x" if "H200" in name.stdout else "a100-8x" if "A100" in name.stdout else "h100-8x"


def test_bf16_point_records_allocator_and_device_memory_over_the_timed_window(fsdp_bench, tmp_path):
    rc, out, err, records = fsdp_bench(
        "run", "model=debug", "precision=bf16", f"cluster={_cluster()}", f"results_dir={tmp_path}", results=tmp_path
    )
    assert rc == 0, out + err
    (record,) = records
    peak = record.metrics.peak_mem_bytes
    assert record.status == "ok" and record.metrics.mfu is not None
    assert 0 < peak.max <= peak.reserved_max <= peak.device_used_max
    assert peak.alloc_retries == 0


@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")
def test_two_local_nodes_put_one_rank_on_each_gpu(fsdp_bench, tmp_path):
    rc, out, err, records = fsdp_bench(
        "run", "model=debug", "nodes=2", f"cluster={_cluster()}", f"results_dir={tmp_path}", results=tmp_path
    )
    assert rc == 0, out + err
    (record,) = records
    # Each agent saw only its own GPU, so each rank's process used one device: the per-rank
    # peaks are both non-zero (two ranks on one GPU would still work, but on shared memory).
    assert record.status == "ok" and all(p > 0 for p in record.metrics.peak_mem_bytes.per_rank)
    assert record.env.env_vars.get("CUDA_VISIBLE_DEVICES") in ("0", "1")
