"""scripts/gpu_check_table.py's logic that starts nothing: the eager-fp8 label, the import check's
verdict, triton's compiler order; and the tolerant op lookup (fsdp_core/ops.py) that keeps the
worker importable on a torch without some op. The script itself runs in tests/e2e/test_gpu_check_script.py."""

from __future__ import annotations

import importlib.util
import json
import re
import sysconfig
from pathlib import Path

import pytest

from bench.analysis.records import parse_record
from fsdp_core import comm_counter, op_sac
from fsdp_core.ops import op_table, present_op, present_ops

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "records" / "real" / "adhoc"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("gpu_check_table", ROOT / "scripts" / "gpu_check_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(precision: str, compile: bool, layout: str = "current") -> dict:
    """A real record's JSON as the table gets it (migrated to this checkout's layout), or as a
    version-1 writer wrote it (a flat spec: what the table reads raw when it does not validate)."""
    data = json.loads((REAL / "079a455ef502" / "result.json").read_text())
    if layout == "v1":
        data["spec"]["precision"], data["spec"]["compile"] = precision, compile
        return data
    data = parse_record(data).model_dump(mode="json")
    data["spec"]["precision"], data["spec"]["train"]["compile"] = precision, compile
    return data


def test_an_eager_fp8_row_is_labelled_not_a_speed_comparison(table):
    mfu_note = _record("fp32", False)["notes"]["mfu"]
    eager = table.record_row("d", _record("fp8", False))
    assert eager["note"] == f"{table.FP8_EAGER_NOTE}; {mfu_note}"
    assert eager["note"].startswith("fp8 eager: torchao float8 is not fast without torch.compile")
    assert table.record_row("d", _record("fp8", True))["note"] == mfu_note  # compiled: a comparison
    assert table.record_row("b", _record("bf16", False))["note"] == mfu_note
    assert table.record_row("d", _record("fp8", False, "v1"))["note"] == eager["note"]
    assert table.record_row("d", _record("fp8", True, "v1"))["note"] == mfu_note
    bare = _record("fp8", False)
    del bare["notes"], bare["spec"]["train"]  # fields missing: still labelled
    assert table.record_row("d", bare)["note"] == table.FP8_EAGER_NOTE


def test_only_what_every_point_needs_fails_the_gpu_run_and_anything_fails_the_dry_run(table):
    problems = {"torchao.float8": "ImportError: no torchao"}
    assert table.import_verdict(problems, imports_only=False) == (
        [], "WARNING: the points that need torchao.float8 will fail (above); the others run")  # fmt: skip
    assert table.import_verdict(problems, imports_only=True) == (
        ["torchao.float8"], "does not import: torchao.float8 (ImportError: no torchao)")  # fmt: skip
    worker = {"fsdp_core.worker": "AttributeError: x", **problems}
    assert table.import_verdict(worker, imports_only=False)[0] == ["fsdp_core.worker"]
    assert table.import_verdict({}, imports_only=False) == ([], "")


def test_every_module_a_point_loads_is_checked(table):
    # What the rank side imports lazily (an indented import in fsdp_core), per feature, must be in
    # the list, or its failure would show only when a point reaches it; what some module of it
    # imports at its top is loaded by the worker's own import, which the list has.
    def imported(indented: bool) -> set[str]:
        start = r"^[ \t]+" if indented else r"^"
        pattern = re.compile(start + r"(?:from|import)\s+((?:torch|torchao|pynvml|fsdp_core)[\w.]*)", re.M)
        return {name for path in (ROOT / "fsdp_core").glob("*.py") for name in pattern.findall(path.read_text())}

    lazy = imported(indented=True) - imported(indented=False)
    assert {"fsdp_core.checkpoint", "torchao.float8", "torch.distributed.fsdp.sharded_grad_scaler"} <= lazy
    assert lazy - set(table.POINT_MODULES) == set()
    assert table.EVERY_POINT in table.POINT_MODULES and "torch._inductor.compile_fx" in table.POINT_MODULES
    assert table.import_problems({"fsdp_core.op_sac": "x", "no_such_module_here": "y"}) == {
        "no_such_module_here": "ModuleNotFoundError: No module named 'no_such_module_here'"
    }


def test_the_c_compiler_is_found_as_triton_looks_for_it(table, monkeypatch):
    found = {"gcc": "/usr/bin/gcc", "clang": "/usr/bin/clang", "cc": "/usr/bin/cc"}
    monkeypatch.setattr("shutil.which", lambda name: found.get(name))
    monkeypatch.setenv("CC", "/opt/cc-of-choice")
    assert table.c_compiler() == "/opt/cc-of-choice"
    monkeypatch.delenv("CC")
    assert table.c_compiler() == "/usr/bin/gcc"
    del found["gcc"]
    assert table.c_compiler() == "/usr/bin/clang"
    del found["clang"]
    assert table.c_compiler() is None  # `cc` alone is not what triton uses


def test_python_include_is_where_this_interpreters_headers_are(table):
    include = table.python_include()
    assert include == Path(sysconfig.get_paths()["include"])
    assert (include / "Python.h").is_file()


def test_op_lookup_skips_what_this_torch_lacks():
    import torch

    assert present_op("_c10d_functional", "reduce_scatter_tensor_out") is (
        torch.ops._c10d_functional.reduce_scatter_tensor_out.default
    )
    assert present_op("_c10d_functional", "no_such_op") is None
    assert present_op("aten", "mm", "no_such_overload") is None
    assert present_ops([("aten", "mm", "default"), ("_c10d_functional", "no_such_op", "default")]) == {
        torch.ops.aten.mm.default
    }
    found, missing = op_table({("aten", "mm", "default"): "mm", ("c10d", "no_such_op_", "default"): "gone"})
    assert found == {torch.ops.aten.mm.default: "mm"} and missing == ["c10d.no_such_op_.default"]


def test_every_counted_collective_exists_in_this_torch():
    # torch 2.11 (the GPU image's) has the same ops; a build without one would count less, not fail.
    assert comm_counter.MISSING_OPS == ()
    assert len(comm_counter.COUNTED_OPS) == 8 and len(comm_counter.FUNCTIONAL_OPS) == 10
    assert {kind for kind, _ in comm_counter.COUNTED_OPS.values()} == set(comm_counter.KINDS)
    assert op_sac.GROUP_OPS["collectives"] and op_sac.GROUP_OPS["max"]


def test_the_profiled_point_is_judged_against_its_cuda_event_step_times(table):
    """breakdown_lines on a record's JSON: parts that add up, a step within 5 % of the CUDA events' and
    no communication (one GPU) are ok; a step 10 % off is UNEXPECTED."""
    split = {"device": "cuda", "steps": 3, "step_s": 0.100, "compute_s": 0.080, "exposed_comm_s": 0.0,
             "idle_s": 0.020, "comm_s": 0.0, "calls_per_step": {}, "timer_step_s": 0.098,
             "trace_bytes_per_rank": [3_000_000], "trace_gzip_bytes_per_rank": [300_000], "export_s": 0.05}  # fmt: skip
    good = table.breakdown_lines([("a-debug-bf16", {"metrics": {"step_breakdown": split}})])
    assert good[0].startswith("Profiled steps of a-debug-bf16 (cuda, 3 steps): step 0.1000 s against")
    assert "1.00 MB raw / 0.100 MB gzipped per rank and step" in good[0] and good[1].startswith("ok: ")
    off = table.breakdown_lines([("a", {"metrics": {"step_breakdown": {**split, "timer_step_s": 0.090}}})])
    assert off[1].startswith("UNEXPECTED") and "within 5 % (no)" in off[1]
    assert table.breakdown_lines([("b", {"metrics": {}})]) == []


def test_the_point_made_to_run_out_of_memory_must_name_phase_allocations_and_leave_its_snapshot(table, tmp_path):
    from bench.schema.protocol import memory_snapshot_file

    record = {
        "point_id": "abc",
        "status": "oom",
        "spec": {"profile": {"memory_history": True}},
        "error": "rank 0: OutOfMemoryError: CUDA out of memory.; in forward of step 0; largest live allocations: "
        "activations (forward) 70.00 GiB (40 blocks)",
    }
    ok, line = table.oom_as_expected("f-tinyllama-oom", record, tmp_path)
    assert not ok and "snapshot written (no)" in line and "phase named (yes)" in line
    snapshot = memory_snapshot_file(tmp_path / table.SWEEP / "abc", 0)
    snapshot.parent.mkdir(parents=True)
    snapshot.write_bytes(b"x" * 2_000_000)
    ok, line = table.oom_as_expected("f-tinyllama-oom", record, tmp_path)
    assert ok and line.endswith("snapshot written (yes), 2.0 MB")
    bare = {**record, "error": "rank 0: OutOfMemoryError: CUDA out of memory."}  # the history was off
    assert table.oom_as_expected("f-tinyllama-oom", bare, tmp_path)[0] is False
    lines = table.memory_lines([("f-tinyllama-oom", record)], tmp_path)
    assert lines[0].endswith("snapshot written") and lines[1].startswith("Out of memory on purpose, f-tinyllama-oom")
