"""scripts/gpu_check.sh's dry run and scripts/gpu_check_table.py, on a CPU machine.

The dry run's config part (every point composes and validates for the H200 preset, the command
lines, the budget) needs no wheels and always runs. The wheel part needs .whl/ from
scripts/gpu_wheels.sh (network), so it skips where that folder is absent. The table is rendered
from real records (tests/fixtures/records/real) laid out as RESULTS/gpu_check/<point_id>/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.analysis.planner.predict import predict
from bench.analysis.records import parse_record

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
TABLE = ROOT / "scripts" / "gpu_check_table.py"
REAL = ROOT / "tests" / "fixtures" / "records" / "real" / "adhoc"
LABELS = (
    "a-debug-bf16",
    "b-tinyllama-bf16-compile",
    "c-llama2-7b-bf16-ac",
    "d-tinyllama-fp8-compile",
    "e-tinyllama-fp16",
    "f-tinyllama-oom",
    "g-debug-bf16-offload",
)
OK_1 = "079a455ef502"  # debug fp32, 1 node, ok
OK_2 = "9a14ef882752"  # debug fp32, 2 nodes, ok, non-zero comm bytes
FAILED = "2afad2d7d8e1"  # injected failure on rank 1


def run_script(results: Path, script: Path = SCRIPT, **env: str) -> subprocess.CompletedProcess:
    # This test's interpreter has the project's dependencies: it stands in for .venv/bin/python.
    full_env = {**os.environ, "FSDP_BENCH_GPU_CHECK_DRY_PYTHON": sys.executable, **env}
    for key in (
        "FSDP_BENCH_GPU_CLUSTER",
        "FSDP_BENCH_GPU_CHECK_POINTS",
        "FSDP_BENCH_GPU_CHECK_DEADLINE_S",
        "PYTHON",
        "OUT",
    ):
        if key not in env:
            full_env.pop(key, None)
    return subprocess.run(
        ["bash", str(script), str(results)], env=full_env, capture_output=True, text=True, timeout=240
    )


def command_line(stdout: str, label: str) -> list[str]:
    """The words of the command the plan prints under `[label]`."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"[{label}] timeout"))
    return lines[at + 1].split()


# ------------------------------------------------------------------------------ dry run: configs


def test_dry_run_config_part_validates_every_point(tmp_path):
    proc = run_script(tmp_path / "res", FSDP_BENCH_GPU_CHECK_DRY="config")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for label in LABELS:
        assert f"  ok      {label}: point_id " in out
    assert "h200-8x (cuda)" in out and "DRY RUN OK" in out
    assert "== 1." not in out  # the wheel part is left out in this mode
    assert not (tmp_path / "res").exists()  # a dry run writes no results


def test_dry_run_command_lines_merge_common_and_point_values(tmp_path):
    out = run_script(tmp_path / "res", FSDP_BENCH_GPU_CHECK_DRY="config").stdout
    results = str(tmp_path / "res")
    a = command_line(out, "a-debug-bf16")
    assert a[:4] == ["timeout", "-k", "30", "55"]
    assert a[4:8] == ["python3", "-m", "bench", "run"]
    for item in ("nodes=1", "gpus_per_node=1", "cluster=h200-8x", "launcher=local", f"results_dir={results}",
                 "sweep.name=gpu_check", "train.steps=8", "train.warmup_steps=2", "model=debug",
                 "precision=bf16", "sweep.point_timeout_s=30"):  # fmt: skip
        assert item in a
    # The first GPU run exercises async saves into pinned memory: two saves (steps 3 and 6 of 6 timed).
    assert {"train.checkpoint=async", "train.checkpoint_every=3"} <= set(a)
    assert "profile.enabled=true" in a  # and profiles steps after its timed ones: a real CUDA trace split
    assert a[-3:] == ["|", "tee", f"{results}/logs/a-debug-bf16.log"]
    b = command_line(out, "b-tinyllama-bf16-compile")
    assert "train.warmup_steps=3" in b and "train.warmup_steps=2" not in b  # the point's value wins
    assert "train.compile=true" in b
    assert "train.steps=45" in b and "train.steps=8" not in b  # 42 timed steps: ~2 s for NVML's energy
    c = command_line(out, "c-llama2-7b-bf16-ac")
    assert "train.steps=7" in c and "train.steps=8" not in c
    assert {"model=llama2-7b", "train.activation_checkpointing=full", "train.seq_len=4096"} <= set(c)
    # fp8 runs compiled, in b's shape: b against d compares bf16 with fp8, both compiled.
    d = command_line(out, "d-tinyllama-fp8-compile")
    assert {"precision=fp8", "train.compile=true", "train.warmup_steps=3", "train.steps=45"} <= set(d)
    same = ("model=", "train.", "sweep.point_timeout_s=")
    assert [w for w in d if w.startswith(same)] == [w for w in b if w.startswith(same)]
    assert "train.steps=24" in command_line(out, "e-tinyllama-fp16")
    assert "train.cpu_offload=true" in command_line(out, "g-debug-bf16-offload")
    # The memory forensics: a's tracker step, c's allocator history (an OOM on an 80 GB GPU leaves its
    # snapshot), and f made to run out of memory with the history on.
    assert "profile.memory_categories=true" in a and "profile.memory_history=true" in c
    f = command_line(out, "f-tinyllama-oom")
    assert {"profile.memory_history=true", "train.micro_batch=1024", "sweep.point_timeout_s=20"} <= set(f)
    timeouts = {label: int(command_line(out, label)[3]) for label in LABELS}
    assert timeouts == {
        "a-debug-bf16": 55, "b-tinyllama-bf16-compile": 110, "c-llama2-7b-bf16-ac": 80,
        "d-tinyllama-fp8-compile": 110, "e-tinyllama-fp16": 40, "f-tinyllama-oom": 45, "g-debug-bf16-offload": 40,
    }  # fmt: skip
    assert "worst case: 480 s of points" in out
    assert "global deadline 480 s" in out


def test_dry_run_fails_on_a_point_invalid_for_the_cluster(tmp_path):
    # An A100 preset has no FP8 tensor cores: the fp8 point does not validate, and the dry run says so.
    proc = run_script(tmp_path / "res", FSDP_BENCH_GPU_CHECK_DRY="config", FSDP_BENCH_GPU_CLUSTER="a100-8x")
    assert proc.returncode == 2
    assert "INVALID d-tinyllama-fp8-compile: precision: a100-8x's devices have no fp8 tensor cores" in proc.stdout
    assert "  ok      a-debug-bf16" in proc.stdout
    assert "error: a point's config is invalid" in proc.stderr


def test_dry_run_point_selection(tmp_path):
    proc = run_script(tmp_path / "res", FSDP_BENCH_GPU_CHECK_DRY="config", FSDP_BENCH_GPU_CHECK_POINTS="c e")
    assert proc.returncode == 0, proc.stderr
    assert "ok      c-llama2-7b-bf16-ac" in proc.stdout and "ok      e-tinyllama-fp16" in proc.stdout
    assert "a-debug-bf16" not in proc.stdout
    assert "worst case: 120 s of points" in proc.stdout  # c 80 + e 40
    none = run_script(tmp_path / "res", FSDP_BENCH_GPU_CHECK_DRY="config", FSDP_BENCH_GPU_CHECK_POINTS="zz")
    assert none.returncode == 2 and "selects no point" in none.stderr


# ------------------------------------------------------------------------------- dry run: wheels


def _scripts_copy(tmp_path: Path) -> Path:
    """The three scripts in an empty tree of their own, so .whl/ can be absent or made up there."""
    root = tmp_path / "tree"
    (root / "scripts").mkdir(parents=True)
    for name in ("gpu_check.sh", "gpu_wheels.sh", "gpu_check_table.py"):
        shutil.copy2(ROOT / "scripts" / name, root / "scripts" / name)
    return root


@pytest.mark.parametrize("dry", ["1", ""])
def test_missing_wheels_name_the_command_to_run(tmp_path, dry):
    root = _scripts_copy(tmp_path)
    proc = run_script(tmp_path / "res", root / "scripts" / "gpu_check.sh", FSDP_BENCH_GPU_CHECK_DRY=dry)
    assert proc.returncode == 2
    assert "run scripts/gpu_wheels.sh first" in proc.stderr


def test_wheel_set_must_hold_one_version_of_each_pin(tmp_path):
    root = _scripts_copy(tmp_path)
    pins = subprocess.run(
        ["bash", str(root / "scripts" / "gpu_wheels.sh"), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "antlr4-python3-runtime==4.9.3" in pins and any(p.startswith("torchao==") for p in pins)
    wheels = root / ".whl"
    wheels.mkdir()
    for pin in pins:  # file names only: the set is checked before pip sees a file
        name, version = pin.split("==")
        (wheels / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").touch()
    (wheels / "omegaconf-2.3.0-py3-none-any.whl").touch()  # a second version
    (wheels / "typing_extensions-4.16.0-py3-none-any.whl").unlink()  # a missing one
    proc = run_script(tmp_path / "res", root / "scripts" / "gpu_check.sh", FSDP_BENCH_GPU_CHECK_DRY="1")
    assert proc.returncode == 2
    assert "omegaconf==2.3.1 wanted, found 2 version(s)" in proc.stderr
    assert "typing-extensions==4.16.0 wanted, found 0 version(s): none" in proc.stderr
    assert "does not match the pins: run scripts/gpu_wheels.sh again" in proc.stderr


@pytest.mark.skipif(
    not (ROOT / ".whl").is_dir(), reason=".whl/ is absent: scripts/gpu_wheels.sh (network) has not been run here"
)
def test_full_dry_run_installs_the_wheels_for_python_312(tmp_path):
    proc = run_script(tmp_path / "res", FSDP_BENCH_GPU_CHECK_DRY="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = next(line for line in proc.stdout.splitlines() if "installed: annotated_types" in line)
    for dist in ("hydra_core-1.3.8", "omegaconf-2.3.1", "antlr4_python3_runtime-4.9.3", "pydantic-2.14.4",
                 "pydantic_core-2.50.5", "torchao-0.17.0"):  # fmt: skip
        assert dist in installed
    assert "installed: bench" in proc.stdout and "sweeps" in proc.stdout  # the project built offline
    # Every module a point loads imports under this machine's Python with the wheels it can load.
    imports = proc.stdout.split("== 1c.")[1].split("== 2.")[0]
    for module in ("fsdp_core.worker", "fsdp_core.checkpoint", "torch.distributed.checkpoint", "fsdp_core.op_sac",
                   "fsdp_core.compile_stats", "torch._inductor.compile_fx", "torchao.float8", "pynvml"):  # fmt: skip
        assert f"  import {module}: ok  [" in imports
    assert "  torchao 0.17.0" in imports and "  nvidia-ml-py 13.615.71" in imports
    assert "C compiler for triton (train.compile): " in imports and "builds a CPython extension with" in imports
    # torch 2.13's DefaultStager stages twice (the 2.11 of the GPU image's stages once).
    assert "checkpoint staging: DefaultStager, one stager stages twice (pinned buffers reused across saves)" in imports
    assert "cuda " not in imports and "NVML energy counter" not in imports  # no GPU, no NVML touched
    assert "DRY RUN OK" in proc.stdout


def test_the_import_check_names_every_module_that_fails(tmp_path):
    # A module a point loads that does not import (a torchao whose import raises, first on the path)
    # is named with its error and what needs it, the other modules still import, and the dry run's
    # --imports-only exits 1 (the GPU run's verdict: tests/unit/test_gpu_check_logic.py).
    shadow = tmp_path / "shadow" / "torchao"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('made up: torchao is broken here')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'shadow'}:{ROOT}"}
    proc = subprocess.run(
        [sys.executable, str(TABLE), "env", "--imports-only"], env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "import torchao.float8: FAILS (ImportError: made up: torchao is broken here)  [precision=fp8]" in proc.stdout
    assert "import fsdp_core.worker: ok" in proc.stdout
    assert "does not import: torchao.float8 (ImportError: made up: torchao is broken here)" in proc.stdout


# ---------------------------------------------------------------------------------------- table


def parse_table(text: str) -> list[dict[str, str]]:
    """The rows of the first markdown table in TEXT, as dicts keyed by its header."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        if line.startswith("|---"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if len(cells) != len(header):  # the second table (communication) starts here
            break
        rows.append(dict(zip(header, cells)))
    return rows


def lay_out(results: Path, point_id: str, edit=None) -> dict:
    """Copy a real record to RESULTS/gpu_check/<point_id>/result.json, optionally edited."""
    data = json.loads((REAL / point_id / "result.json").read_text())
    if edit:
        edit(data)
    target = results / "gpu_check" / point_id / "result.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data))
    return data


def render(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TABLE), "table", *args], capture_output=True, text=True, timeout=120)


def test_table_of_real_records(tmp_path):
    one = lay_out(tmp_path, OK_1)
    two = lay_out(tmp_path, OK_2)
    proc = render(str(tmp_path), "--out", str(tmp_path / "table.md"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "table.md").read_text() == proc.stdout
    rows = parse_table(proc.stdout)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for data in (one, two):
        row = next(r for r in rows if r["tokens/s"] == f"{data['metrics']['tokens_per_s']:,.0f}")
        assert row["point"] == "debug fp32"  # without a plan: model and precision
        assert row["step median ms"] == f"{data['metrics']['step_time_s']['median'] * 1e3:.1f}"
        assert row["peak alloc GiB"] == f"{data['metrics']['peak_mem_bytes']['max'] / 2**30:.2f}"
        assert row["MFU %"] == "-" and row["HFU %"] == "-"  # CPU: no peak FLOPs
        assert row["peak reserved GiB"] == "-"  # these records predate reserved_max
        planned = predict(parse_record(data).spec)["peak_memory_bytes"]
        assert row["planned alloc GiB"] == f"{planned['allocated'] / 2**30:.2f}" != "-"
        assert row["planned reserved GiB"] == f"{planned['reserved'] / 2**30:.2f}"
        assert row["device"] == "cpu (x86_64)"
        assert row["note"] == data["notes"]["mfu"]
    # e.g. 079a455ef502: 6,248 tokens/s, 10.2 ms, 0.31 GiB
    assert any(r["tokens/s"] == "6,248" and r["step median ms"] == "10.2" for r in rows)
    assert "| 9a14ef882752 |" not in proc.stdout  # labelled by spec, not by id
    comm = proc.stdout.split("Communication counted per step")[1]
    assert "| debug fp32 | 989,440 | 625,920 | 0 |" in comm  # the 2-rank record's counts
    assert "| debug fp32 | 0 | 0 | 0 |" in comm
    assert "At world size 1 FSDP moves nothing over the network" in comm
    assert "UNEXPECTED" not in comm


def test_table_follows_the_plan_and_outcomes(tmp_path):
    lay_out(tmp_path, OK_1)
    failed = lay_out(tmp_path, FAILED)
    lay_out(tmp_path, OK_2)  # left by an earlier run of the skipped point: not shown
    (tmp_path / "plan.tsv").write_text(
        f"a-ok\t{OK_1}\t\n"
        f"b-failed\t{FAILED}\t\n"
        "c-crashed\t0123456789ab\t\n"
        "d-invalid\t-\tprecision: a100-8x's devices have no fp8 tensor cores; allowed: fp32, bf16\n"
        f"e-late\t{OK_2}\t\n"
    )
    (tmp_path / "outcomes.tsv").write_text(
        "a-ok\tran\texit 0; log: logs/a-ok.log\n"
        "b-failed\tran\texit 1; log: logs/b-failed.log\n"
        "c-crashed\tran\texit 2; log: logs/c-crashed.log\n"
        "d-invalid\tinvalid\tconfig does not validate\n"
        "e-late\tskipped\tglobal deadline: needs 45 s, 20 s left\n"
    )
    proc = render(str(tmp_path), "--plan", str(tmp_path / "plan.tsv"), "--outcomes", str(tmp_path / "outcomes.tsv"))
    assert proc.returncode == 1  # not every point is ok
    rows = parse_table(proc.stdout)
    assert [(r["point"], r["status"]) for r in rows] == [
        ("a-ok", "ok"), ("b-failed", "failed"), ("c-crashed", "no record"), ("d-invalid", "invalid"),
        ("e-late", "skipped")]  # fmt: skip
    by = {r["point"]: r for r in rows}
    assert (
        by["b-failed"]["note"] == failed["error"] == "rank 1: RuntimeError: debug: injected failure on rank 1 at step 3"
    )
    assert by["b-failed"]["tokens/s"] == "-" and by["b-failed"]["peak alloc GiB"] == "-"
    assert by["c-crashed"]["note"] == "exit 2; log: logs/c-crashed.log"
    assert by["d-invalid"]["note"].startswith("precision: a100-8x's devices have no fp8 tensor cores")
    assert by["e-late"]["note"] == "global deadline: needs 45 s, 20 s left"
    assert by["a-ok"]["tokens/s"] == "6,248"


def test_table_tolerates_new_and_missing_fields(tmp_path):
    def with_reserved(data):
        data["metrics"]["peak_mem_bytes"]["reserved_max"] = 3 * 2**30
        data["metrics"]["comm_bytes_per_step"] = {"all_gather": 4096, "reduce_scatter": 0, "all_reduce": 0}

    def bare(data):
        del data["metrics"], data["env"], data["notes"]
        data["some_future_field"] = 1  # does not validate against this checkout's schema

    lay_out(tmp_path, OK_1, with_reserved)
    lay_out(tmp_path, "6f14441973f5", bare)
    proc = render(str(tmp_path))
    rows = parse_table(proc.stdout)
    full = next(r for r in rows if r["peak reserved GiB"] != "-")
    assert full["peak reserved GiB"] == "3.00"
    raw = next(r for r in rows if r["tokens/s"] == "-")
    assert raw["status"] == "ok" and raw["device"] == "-"
    assert raw["note"].startswith("invalid record")  # the validation problem, in place of notes.mfu
    assert "does not validate here" in proc.stdout
    assert "UNEXPECTED: non-zero bytes at world size 1 for debug fp32" in proc.stdout
    assert proc.returncode == 0  # both records say ok


def test_table_without_records(tmp_path):
    proc = render(str(tmp_path))
    assert proc.returncode == 1
    assert "(no records and no plan: nothing ran)" in proc.stdout
