"""profile.memory_history on a CPU point (fsdp_core/memory_history.py): the CUDA-only history never
starts there and leaves no snapshot; the rule refuses the knob on a CPU cluster before any launch
(tests/e2e/test_run_cli.py BAD_INPUT). The CUDA path is the GPU check's."""

from __future__ import annotations

import torch

from bench.config.compose import spec_from_fields
from bench.config.rules import launch_problems
from bench.schema.protocol import memory_snapshot_file, memory_snapshots
from bench.schema.spec import ProfileSpec
from fsdp_core import memory_history


def test_a_cpu_point_records_no_history_and_writes_no_snapshot(tmp_path):
    profile = ProfileSpec(memory_history=True, memory_history_entries=10)
    assert memory_history.start(profile, torch.device("cpu")) is None
    memory_history.stop()
    assert memory_history.dump_on_failure(tmp_path, 0) is None
    assert memory_snapshots(tmp_path) == []
    assert memory_snapshot_file(tmp_path, 3).name == "memory_snapshot_rank3.pickle"


def test_the_rule_names_the_cluster_and_its_device_type():
    spec = spec_from_fields(model="debug")
    spec = spec.model_copy(update={"profile": ProfileSpec(memory_history=True)})
    assert "profile.memory_history: needs a CUDA cluster; local-cpu's device_type is cpu" in launch_problems(spec)
