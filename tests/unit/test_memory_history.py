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
    assert memory_history.dump_on_failure(tmp_path, 0) == []
    assert memory_snapshots(tmp_path) == []
    assert memory_snapshot_file(tmp_path, 3).name == "memory_snapshot_rank3.pickle"


def test_the_rule_names_the_cluster_and_its_device_type():
    spec = spec_from_fields(model="debug")
    spec = spec.model_copy(update={"profile": ProfileSpec(memory_history=True)})
    assert "profile.memory_history: needs a CUDA cluster; local-cpu's device_type is cpu" in launch_problems(spec)


def _block(size: int, *frames: tuple[str, str], state: str = "active_allocated") -> dict:
    return {"size": size, "state": state, "frames": [{"filename": f, "line": 7, "name": n} for f, n in frames]}


TORCH = "/venv/lib/python3.11/site-packages/torch"
# A snapshot as `torch.cuda.memory._snapshot()` gives it (frames innermost first), written by hand:
# the CPU build has no CUDA allocator to take one from.
SNAPSHOT = {
    "segments": [
        {
            "device": 0,
            "blocks": [
                _block(6 << 30, (f"{TORCH}/nn/functional.py", "silu"), ("/repo/fsdp_core/model.py", "forward")),
                _block(2 << 30, ("/repo/fsdp_core/model.py", "forward")),
                _block(
                    3 << 30,
                    (f"{TORCH}/distributed/fsdp/_fully_shard/_fsdp_collectives.py", "foreach_all_gather"),
                    (f"{TORCH}/distributed/fsdp/_fully_shard/_fsdp_param_group.py", "unshard"),
                    ("/repo/fsdp_core/model.py", "forward"),
                ),
                _block(1 << 30, (f"{TORCH}/optim/adamw.py", "_init_group"), (f"{TORCH}/optim/adamw.py", "step")),
                _block(5 << 30, (f"{TORCH}/autograd/graph.py", "_engine_run_backward")),
                _block(9 << 30, ("/repo/fsdp_core/model.py", "forward"), state="inactive"),  # cached, not live
                _block(512 << 20),  # allocated while the history was off
                # The RoPE tables: set-up, though built in the model's own file.
                _block(
                    64 << 20, ("/repo/fsdp_core/model.py", "rope_tables"), ("/repo/fsdp_core/model.py", "init_buffers")
                ),
            ],
        },
        {"device": 1, "blocks": [_block(40 << 30, ("/repo/fsdp_core/model.py", "forward"))]},  # another GPU
    ]
}


def test_an_oom_names_its_phase_and_the_largest_live_allocations_by_category():
    from bench.schema.protocol import RankError
    from fsdp_core.allocations import NOT_RECORDED, live_by_category

    largest = live_by_category(SNAPSHOT, device=0, top=4)
    assert [(a["category"], a["bytes"] >> 20, a["blocks"]) for a in largest] == [
        ("activations (forward)", 8 << 10, 2),
        ("gradients and backward temporaries", 5 << 10, 1),
        ("unsharded parameters (FSDP all-gather)", 3 << 10, 1),
        ("optimizer state", 1 << 10, 1),
    ]
    assert largest[0]["largest"] == 6 << 30 and largest[0]["where"] == "/repo/fsdp_core/model.py:7 forward"
    assert [(a["category"], a["bytes"] >> 20) for a in live_by_category(SNAPSHOT, device=0, top=9)[4:]] == [
        (NOT_RECORDED, 512),
        ("parameters and buffers (set-up)", 64),
    ]
    error = RankError(1, "OutOfMemoryError", "OutOfMemoryError: CUDA out of memory.", True, phase="backward of step 0")
    error.largest = largest[:2]
    assert error.oom_reason() == (
        "rank 1: OutOfMemoryError: CUDA out of memory.; in backward of step 0; largest live allocations: "
        "activations (forward) 8.00 GiB (2 blocks), gradients and backward temporaries 5.00 GiB (1 block); "
        "its largest block 6.00 GiB from /repo/fsdp_core/model.py:7 forward"
    )
    assert RankError(0, "OutOfMemoryError", "m", True).oom_reason() == "rank 0: m"  # no phase, no snapshot
