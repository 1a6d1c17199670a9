"""launcher=ray for real: a 2-worker point through Ray Train's TorchTrainer on a local Ray.

Ray is heavy on a 2-core machine (a local cluster takes ~10 s to start): one point, few steps, with
a checkpoint after each timed step, reported to Ray Train as well. (Ray's restore path, a worker
restart with launcher.max_failures=1, takes another ~50 s here: measured by hand, docs/results.)
Skips with the printed reason where `ray[train]` is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest
from bench_cli import run_separately

from bench.config.problems import ConfigError


def ray_processes() -> list[str]:
    """Command lines of Ray's node processes and workers on this host."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in out if "raylet" in line or "gcs_server" in line or line.startswith("ray::")]


@pytest.mark.ray
@pytest.mark.timeout(240)
@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_two_worker_point_through_local_ray(tmp_path):
    if importlib.util.find_spec("ray") is None:
        print("ray test skipped: ray is not installed (pip install 'fsdp-bench[ray]')")
        pytest.skip("ray is not installed (pip install 'fsdp-bench[ray]')")
    before = ray_processes()
    args = [
        "model=debug",
        "nodes=2",
        "train.steps=4",
        "train.warmup_steps=1",
        "train.checkpoint=sync",
        "train.checkpoint_every=1",
        "launcher=ray",
        f"results_dir={tmp_path}",
    ]
    proc = run_separately("run", *args, timeout=200)
    assert proc.rc == 0, proc.stdout + proc.stderr
    (record_path,) = tmp_path.glob("adhoc/*/result.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "ok"
    assert record["spec"]["launcher"] == "ray"
    assert record["spec"]["world_size"] == 2
    assert len(record["metrics"]["step_times_s"]) == 3
    (driver_log,) = tmp_path.glob("adhoc/_launches/*/ray_driver.log")
    # The rendezvous address Ray handed the workers is loopback, not the primary interface's.
    assert "fsdp-bench ray: node ip 127.0.0.1, 2 workers" in driver_log.read_text()
    # Every durable save was reported to Ray Train as a pointer checkpoint naming its DCP step folder.
    point_id, checkpoint_dir = record["point_id"], record_path.parent / "checkpoint"
    assert [s["step"] for s in record["metrics"]["checkpoint"]["saves"]] == [1, 2, 3]
    pointers = sorted(driver_log.parent.glob(f"ray/*/{point_id}-step-*/fsdp_bench_checkpoint.json"))
    assert [json.loads(p.read_text()) for p in pointers] == [
        {"point_id": point_id, "step": step, "location": str(checkpoint_dir / f"step-{step:08d}")} for step in (1, 2, 3)
    ]
    assert f"fsdp-bench ray: latest reported checkpoint {pointers[-1].parent}" in driver_log.read_text()
    assert ray_processes() == before  # the local cluster went down with the driver


def test_ray_missing_is_invalid_input_with_install_hint(monkeypatch):
    from bench.run.launch import get_launcher

    launcher = get_launcher("ray", {"name": "ray"})
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real_find_spec(name, *a)
    )
    with pytest.raises(ConfigError) as err:
        launcher.check_available(None)
    assert err.value.lines == ["launcher: ray needs Ray Train, which is not installed: pip install 'fsdp-bench[ray]'"]


def test_unknown_ray_option_is_invalid_input():
    from bench.run.launch import get_launcher

    with pytest.raises(ConfigError) as err:
        get_launcher("ray", {"name": "ray", "adress": "auto"})
    assert err.value.lines[0].startswith(
        "launcher.adress: unknown field for launcher=ray (did you mean address?); allowed: address, "
    )


def test_negative_ray_max_failures_is_invalid_input():
    from bench.run.launch import get_launcher

    launcher = get_launcher("ray", {"name": "ray", "max_failures": -1})
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install 'fsdp-bench[ray]')")
    with pytest.raises(ConfigError) as err:
        launcher.check_available(None)
    assert err.value.lines == ["launcher.max_failures: must be >= 0, got -1"]
