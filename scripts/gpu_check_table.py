"""The Python half of scripts/gpu_check.sh: validate its points before any GPU time, tabulate after.

    gpu_check_table.py validate POINTS [--plan-out PLAN]
        POINTS: lines `label<TAB>override override ...` (`-` reads stdin). Composes and validates
        each point as `fsdp-bench run` would (Hydra + the RunSpec rules), without the local
        launcher's host checks, so CUDA points validate on a CPU machine too. Prints one line per
        point; PLAN gets `label<TAB>point_id<TAB>reason` (point_id `-` when invalid).
        Exit 0 when every point is valid, 2 otherwise.

    gpu_check_table.py env [--imports-only]
        On the GPU machine, after the installs: imports every package and every module a point
        loads (the worker, checkpointing, compile, torchao's float8, NVML), each on its own, and
        prints versions, the GPU, whether triton's C compiler builds a CPython extension
        (train.compile), the checkpoint staging torch offers and how often NVML's energy counter
        updates. Exit 1 when what every point needs does not import; a feature's module that fails
        is reported and the points that need it fail on their own. --imports-only (the dry run, on a
        CPU machine): no GPU or NVML is touched, and any module that does not import exits 1.

    gpu_check_table.py table RESULTS [--plan PLAN] [--outcomes OUTCOMES] [--out table.md]
        One markdown row per point of PLAN (in plan order), measured peak memory beside the
        planner's (allocated and reserved), then per other record under
        RESULTS/gpu_check; without PLAN, one row per record. OUTCOMES: lines
        `label<TAB>outcome<TAB>detail` written by the shell script (outcome `skipped` for points
        the global deadline left out). Then the communication bytes per step.
        Exit 0 when every planned point (every record, without PLAN) is `ok`, 1 otherwise.

Rows are built from the records' JSON as plain dicts and every field is optional, so a record
written by an older or newer writer (for example without `peak_mem_bytes.reserved_max`) still
gets a row; a record that does not validate against this checkout's schema is read raw.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# The checkout's own packages, as `python3 -m bench` run from the repository root imports them.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.schema.metrics import shown_in  # noqa: E402
from bench.schema.units import GIB  # noqa: E402

SWEEP = "gpu_check"  # sweep.name of the check's points: records live at RESULTS/gpu_check/<point_id>/
# The measured columns are the catalogue's (bench/schema/metrics.py: views "gpu"), each headed by its
# heading and display unit; the planner's peak memory follows them.
METRICS = shown_in("gpu")
PLANNED = ("planned alloc GiB", "planned reserved GiB")
COLUMNS = ("point", "status", *(m.unit_heading for m in METRICS), *PLANNED, "device", "note")


def read_tsv(path: str | Path) -> list[list[str]]:
    """Tab-separated lines; `-` is stdin; blank lines and `#` comments are skipped."""
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
    return [line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#")]


# ---------------------------------------------------------------------------------------- validate


def validate(points: list[list[str]], plan_out: Path | None) -> int:
    from bench.config.compose import load_point
    from bench.config.problems import ConfigError

    plan, bad = [], 0
    for label, overrides, *_ in points:
        try:
            spec = load_point(overrides.split()).spec
        except ConfigError as exc:
            bad += 1
            reason = "; ".join(exc.lines)
            print(f"  INVALID {label}: {reason}")
            plan.append((label, "-", reason))
            continue
        print(
            f"  ok      {label}: point_id {spec.point_id}, {spec.model.name} {spec.precision} seq {spec.train.seq_len} "
            f"x micro_batch {spec.train.micro_batch}, {spec.train.steps} steps ({spec.train.warmup_steps} warm-up), "
            f"world {spec.world_size}, {spec.cluster.name} ({spec.device_type}), "
            f"point_timeout_s {spec.sweep.point_timeout_s:g}"
        )
        plan.append((label, spec.point_id, ""))
    if plan_out is not None:
        plan_out.parent.mkdir(parents=True, exist_ok=True)
        plan_out.write_text("".join("\t".join(row) + "\n" for row in plan))
    return 2 if bad else 0


# --------------------------------------------------------------------------------------------- env

# module -> distribution (for its version)
REQUIRED = {
    "torch": "torch",
    "hydra": "hydra-core",
    "omegaconf": "omegaconf",
    "pydantic": "pydantic",
    "yaml": "PyYAML",
    "packaging": "packaging",
    "pandas": "pandas",
    "jinja2": "jinja2",
    "rich": "rich",
    "scipy": "scipy",
}


# Every module a point loads beyond REQUIRED, with what needs it: an import that fails here would
# fail each such point after its start-up, so it shows before any point spends device time.
POINT_MODULES = {
    "fsdp_core.worker": "every point (train, comm_counter, metrics, parallelize, precision, preflight, telemetry)",
    "fsdp_core.checkpoint": "train.checkpoint",
    "torch.distributed.checkpoint": "train.checkpoint",
    "torch.distributed.checkpoint.staging": "train.checkpoint=async (pinned staging)",
    "fsspec": "train.checkpoint_dir as a URL (DCP picks its fsspec writer)",
    "torch.distributed.algorithms._checkpoint.checkpoint_wrapper": "train.activation_checkpointing",
    "fsdp_core.op_sac": "train.activation_checkpointing=selective_op",
    "torch.distributed.fsdp.sharded_grad_scaler": "precision=fp16",
    "fsdp_core.compile_stats": "train.compile",
    "torch._dynamo": "train.compile (the counting backend looks the named backend up)",
    "torch.nn.functional": "precision=fp8 (a preflight's fp8 matmuls: scaled_mm)",
    "torch._inductor.compile_fx": "train.compile",
    "torchao.float8": "precision=fp8",
    "pynvml": "telemetry's NVML readers",
    "torch.distributed.fsdp._fully_shard._fsdp_collectives": "debug.comm_delay_ms (FSDP2's default collectives)",
    "torch.distributed._tools.fsdp2_mem_tracker": "profile.memory_categories (FSDP2's memory tracker)",
}
EVERY_POINT = "fsdp_core.worker"
# Names a point calls in these modules (an old or new release may lack one).
POINT_NAMES = {
    "torchao.float8": ("convert_to_float8_training", "Float8LinearConfig", "precompute_float8_dynamic_scale_for_fsdp"),
    "torch.distributed.checkpoint": ("async_save", "save", "load", "FileSystemWriter"),
    "torch._dynamo": ("lookup_backend",),
    "torch.nn.functional": ("scaled_mm", "ScalingType"),
    "torch.distributed.fsdp._fully_shard._fsdp_collectives": ("DefaultAllGather", "DefaultReduceScatter"),
    "torch.distributed._tools.fsdp2_mem_tracker": ("FSDPMemTracker",),
}
# What triton compiles for its launcher: a CPython extension (train.compile on CUDA).
C_PROBE = """#include <Python.h>
static struct PyModuleDef probe = {PyModuleDef_HEAD_INIT, "probe", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_probe(void) { return PyModule_Create(&probe); }
"""


def import_problems(modules: dict[str, str] = POINT_MODULES) -> dict[str, str]:
    """module -> why it cannot be used (its import error, or a name a point calls that it lacks);
    every module is tried, so all failures show at once."""
    import importlib

    problems = {}
    for module in modules:
        try:
            loaded = importlib.import_module(module)
        except Exception as exc:  # any import failure is the same answer: not usable
            problems[module] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            continue
        lacking = [name for name in POINT_NAMES.get(module, ()) if not hasattr(loaded, name)]
        if lacking:
            problems[module] = f"has no {', '.join(lacking)}"
    return problems


def c_compiler() -> str | None:
    """The C compiler triton uses (python/triton/runtime/build.py): $CC, else gcc, else clang (not `cc`)."""
    import os
    import shutil

    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")


def python_include() -> Path:
    """Where Python.h is for this interpreter, as triton looks (Debian's posix_local scheme mapped)."""
    import sysconfig

    scheme = sysconfig.get_default_scheme()
    scheme = "posix_prefix" if scheme == "posix_local" else scheme
    return Path(sysconfig.get_paths(scheme=scheme)["include"])


def compiler_check() -> tuple[bool, str]:
    """(ok, one line): whether this machine builds a CPython extension as triton does for train.compile."""
    import subprocess
    import tempfile

    cc, include = c_compiler(), python_include()
    if cc is None:
        return False, "no C compiler ($CC, gcc or clang): triton cannot build its launcher"
    if not (include / "Python.h").is_file():
        return False, f"no {include / 'Python.h'} (the Python headers): triton cannot build its launcher"
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "probe.c", Path(tmp) / "probe.so"
        source.write_text(C_PROBE)
        command = [cc, str(source), "-O3", "-shared", "-fPIC", f"-I{include}", "-o", str(target)]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{cc} did not run ({type(exc).__name__}: {exc})"
        if proc.returncode != 0 or not target.is_file():
            first = next((line for line in proc.stderr.splitlines() if line.strip()), f"exit {proc.returncode}")
            return False, f"{cc} cannot build a CPython extension: {first}"
    return True, f"{cc} builds a CPython extension with {include / 'Python.h'}"


def staging_line() -> str:
    """Which async-checkpoint staging this torch gives the engine (fsdp_core/checkpoint_staging.py):
    DCP's DefaultStager, and whether one stager can stage twice (torch 2.11's cannot)."""
    try:
        from fsdp_core import checkpoint_staging
    except Exception as exc:  # its import failure is fsdp_core.checkpoint's, reported above
        return f"checkpoint staging: unknown ({type(exc).__name__}: {exc})"
    if checkpoint_staging.stager_classes() is None:
        return "checkpoint staging: this torch has no DefaultStager: the writer stages into pageable memory"
    if checkpoint_staging.reusable():
        return "checkpoint staging: DefaultStager, one stager stages twice (pinned buffers reused across saves)"
    return "checkpoint staging: DefaultStager stages once (a new stager and new pinned buffers each save)"


def env(imports_only: bool = False) -> int:
    """Print what the points need and whether it is there. Exit 1 when what every point needs does
    not import; with imports_only (the dry run, on a machine without a GPU) also when any module a
    point loads does not, and the GPU and NVML are not touched."""
    import importlib
    import importlib.metadata

    versions, missing = {}, []
    for module, dist in REQUIRED.items():
        try:
            importlib.import_module(module)
        except Exception as exc:  # any import failure is the same answer: not usable
            missing.append(f"{module} ({type(exc).__name__}: {exc})")
            continue
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "?"
    print("python", sys.version.split()[0], " ".join(f"{k} {v}" for k, v in versions.items()))
    if missing:
        print("does not import: " + "; ".join(missing))
        return 1
    import torch

    problems = import_problems()
    for module, needed_by in POINT_MODULES.items():
        state = f"FAILS ({problems[module]})" if module in problems else "ok"
        print(f"import {module}: {state}  [{needed_by}]")
    for dist in ("torchao", "nvidia-ml-py"):
        try:
            print(dist, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            print(dist, "not installed")
    if not imports_only:
        name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "(no CUDA device)"
        print(f"cuda {torch.version.cuda}, {torch.cuda.device_count()} device(s): {name}")
    gpu = torch.cuda.is_available() and not imports_only
    try:
        import triton

        print("triton", triton.__version__)
    except ImportError:
        print("triton: not installed" + (": train.compile points will fail" if gpu else " (needed only on a GPU)"))
    ok, line = compiler_check()
    print("C compiler for triton (train.compile):", line if ok else f"FAILS: {line}")
    print(staging_line())
    try:
        from fsdp_core.comm_counter import MISSING_OPS
    except Exception:  # noqa: BLE001 - the import check above has named the failure; the verdict follows
        MISSING_OPS = ()
    if MISSING_OPS:
        print(f"comm counter: this torch lacks {', '.join(MISSING_OPS)} (those collectives are not counted)")
    if gpu:
        from fsdp_core.telemetry_readers import nvml_energy_update_period

        print(nvml_energy_update_period({"uuid": str(torch.cuda.get_device_properties(0).uuid)}))
    failing, line = import_verdict(problems, imports_only)
    if line:
        print(line)
    return 1 if failing else 0


def import_verdict(problems: dict[str, str], imports_only: bool) -> tuple[list[str], str]:
    """(the modules that fail the check, its closing line). On the GPU machine only what every point
    needs fails it: a feature's module that does not import fails just the points that use it, and
    the others still measure; the dry run fails on any, so it is fixed before device time is spent."""
    failing = [m for m in problems if imports_only or m == EVERY_POINT]
    if failing:
        return failing, "does not import: " + "; ".join(f"{m} ({problems[m]})" for m in failing)
    if problems:
        return [], f"WARNING: the points that need {', '.join(problems)} will fail (above); the others run"
    return [], ""


# ------------------------------------------------------------------------------------------- table


def get(data: Any, *keys: str) -> Any:
    """data[k1][k2]..., or None where any level is missing or null."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _num(value: Any, fmt: str, scale: float = 1.0) -> str:
    return "-" if not isinstance(value, (int, float)) else format(value * scale, fmt)


def _cell(text: Any) -> str:
    """One table cell: no newlines, no bare pipes."""
    return " ".join(str(text).split()).replace("|", "\\|") if text not in (None, "") else "-"


def load(results: Path) -> tuple[dict[str, dict], list[str]]:
    """point_id -> record JSON for every record under RESULTS/gpu_check, plus lines about bad ones."""
    from bench.analysis.records import load_records

    records, problems = load_records(results / SWEEP) if (results / SWEEP).is_dir() else ([], [])
    by_id = {r.point_id: r.model_dump(mode="json") for r in records}
    notes = []
    for problem in problems:
        # Still show what it holds: a record from another writer version must not vanish from the table.
        try:
            data = json.loads(Path(problem.path).read_text())
        except (OSError, ValueError):
            notes.append(f"unreadable record {problem.path}: {problem.reason}")
            continue
        if isinstance(data, dict):
            data["_problem"] = problem.reason
            by_id[str(data.get("point_id") or Path(problem.path).parent.name)] = data
        notes.append(f"record {problem.path} does not validate here ({problem.reason}); shown as read")
    return by_id, notes


def planned_peak(record: dict) -> dict[str, Any]:
    """The planner's peak allocated and reserved bytes for the record's point (bench/analysis/planner/memory.py),
    beside the measured ones, so the first GPU run calibrates the memory model; {} when the record's
    spec does not validate or plan here."""
    from bench.analysis.planner.predict import predict
    from bench.schema.spec import RunSpec

    try:
        return predict(RunSpec.model_validate(record.get("spec")))["peak_memory_bytes"]
    except Exception:  # a record of another writer version, or a point the planner cannot model: no row lost
        return {}


# The note of an fp8 point run without torch.compile, so its row is not read as bf16 against fp8.
FP8_EAGER_NOTE = "fp8 eager: torchao float8 is not fast without torch.compile; not a speed comparison"


def spec_train(record: dict) -> dict:
    """The record's train settings (a record that did not validate is read as it is, any version)."""
    spec = record.get("spec") or {}
    train = spec.get("train")
    return train if isinstance(train, dict) else spec


def record_row(label: str, record: dict) -> dict[str, str]:
    planned = planned_peak(record)
    note = record.get("error") or get(record, "notes", "mfu") or record.get("_problem")
    if get(record, "spec", "precision") == "fp8" and not spec_train(record).get("compile"):
        note = f"{FP8_EAGER_NOTE}; {note}" if note else FP8_EAGER_NOTE
    return {
        "point": label,
        "status": record.get("status") or "-",
        # The catalogue reads its paths in the record's JSON as it does in a RunResult.
        **{m.unit_heading: m.display.number(m.value(record)) for m in METRICS},
        "planned alloc GiB": _num(planned.get("allocated"), ".2f", 1 / GIB),
        "planned reserved GiB": _num(planned.get("reserved"), ".2f", 1 / GIB),
        "device": get(record, "env", "device_name") or "-",
        "note": note or "",
    }


def empty_row(label: str, status: str, note: str) -> dict[str, str]:
    return {**dict.fromkeys(COLUMNS, "-"), "point": label, "status": status, "note": note}


def default_label(record: dict) -> str:
    spec = record.get("spec") or {}
    train = spec_train(record)
    model = spec.get("model")
    parts = [model.get("name") if isinstance(model, dict) else model, spec.get("precision")]
    parts += ["compile" if train.get("compile") else None, "offload" if train.get("cpu_offload") else None]
    return " ".join(str(p) for p in parts if p) or str(record.get("point_id", "?"))


def build_rows(
    by_id: dict[str, dict], plan: list[list[str]] | None, outcomes: dict[str, tuple[str, str]]
) -> tuple[list[dict[str, str]], list[tuple[str, dict]]]:
    """Table rows, and (label, record) for each record shown (for the communication table)."""
    rows, shown, used = [], [], set()
    for label, point_id, *rest in plan or []:
        reason = rest[0] if rest else ""
        used.add(point_id)  # a skipped point's record from an earlier run is not shown as an extra row
        outcome, detail = outcomes.get(label, ("", ""))
        if outcome == "skipped":
            rows.append(empty_row(label, "skipped", detail))
        elif point_id == "-":
            rows.append(empty_row(label, "invalid", reason))
        elif point_id in by_id:
            rows.append(record_row(label, by_id[point_id]))
            shown.append((label, by_id[point_id]))
        else:
            rows.append(empty_row(label, "no record", detail or "the point wrote no result.json"))
    extra = [(pid, rec) for pid, rec in by_id.items() if pid not in used]
    extra.sort(key=lambda item: (get(item[1], "model_info", "params") or 0, default_label(item[1]), item[0]))
    for _, record in extra:
        label = default_label(record)
        rows.append(record_row(label, record))
        shown.append((label, record))
    return rows, shown


def markdown(rows: list[dict[str, str]], columns: tuple[str, ...]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row[c]) for c in columns) + " |" for row in rows]
    return lines


def comm_lines(shown: list[tuple[str, dict]]) -> list[str]:
    lines = ["Communication counted per step (bytes per rank, counted on the last warm-up step):", ""]
    kinds = (("all-gather", "all_gather"), ("reduce-scatter", "reduce_scatter"), ("all-reduce", "all_reduce"))
    rows, nonzero_at_one = [], []
    for label, record in shown:
        comm = get(record, "metrics", "comm_bytes_per_step")
        row = {"point": label}
        for title, key in kinds:
            row[title] = _num(get(comm, key), ",.0f") if comm else "-"
        rows.append(row)
        if comm and get(record, "spec", "world_size") == 1 and any(get(comm, key) for _, key in kinds):
            nonzero_at_one.append(label)
    lines += markdown(rows, ("point", *(title for title, _ in kinds)))
    lines += [
        "",
        "At world size 1 FSDP moves nothing over the network (collectives on a group of one rank are not "
        'counted), so zero bytes is expected for every single-GPU point; "-" means the record has no count.',
    ]
    if nonzero_at_one:
        lines.append(f"UNEXPECTED: non-zero bytes at world size 1 for {', '.join(nonzero_at_one)}")
    return lines


def breakdown_lines(shown: list[tuple[str, dict]]) -> list[str]:
    """The profiled point's split of its real CUDA trace: it must add up to the step, match the CUDA-event
    step times of the same steps within 5 % and (one GPU, full_shard) hold no communication; with the
    trace's size and export time per step."""
    lines = []
    for label, record in shown:
        b = get(record, "metrics", "step_breakdown")
        if not b:
            continue
        steps, step, timer = b.get("steps") or 1, b.get("step_s"), b.get("timer_step_s")
        parts = [b.get("compute_s"), b.get("exposed_comm_s"), b.get("idle_s")]
        sums = None not in (step, *parts) and abs(sum(parts) - step) <= 0.05 * step
        matches = None not in (step, timer) and abs(step - timer) <= 0.05 * timer
        silent = not b.get("comm_s") and not b.get("calls_per_step")
        raw, packed = b.get("trace_bytes_per_rank") or [0], b.get("trace_gzip_bytes_per_rank") or [0]
        lines += [
            f"Profiled steps of {label} ({b.get('device')}, {steps} steps): step {_num(step, '.4f')} s against "
            f"the CUDA events' {_num(timer, '.4f')} s; compute {_num(b.get('compute_s'), '.4f')}, exposed comm "
            f"{_num(b.get('exposed_comm_s'), '.4f')}, idle {_num(b.get('idle_s'), '.4f')} s; trace "
            f"{max(raw) / steps / 1e6:.2f} MB raw / {max(packed) / steps / 1e6:.3f} MB gzipped per rank and step, "
            f"export {_num(b.get('export_s'), '.3f')} s",
            f"{'ok' if sums and matches and silent else 'UNEXPECTED'}: the parts add up to the step "
            f"({'yes' if sums else 'no'}), the step matches the CUDA events within 5 % ({'yes' if matches else 'no'}), "
            f"no communication on one GPU ({'yes' if silent else 'no'})",
        ]
    return lines


EXPECTED_OOM = "-oom"  # a point whose label ends so is made to run out of memory (gpu_check.sh's f)


def rank0_snapshot(record: dict, results: Path) -> Path:
    """Where rank 0's allocator snapshot of this record's point would be (profile.memory_history)."""
    from bench.schema.protocol import memory_snapshot_file

    return memory_snapshot_file(results / SWEEP / str(record.get("point_id")), 0)


def oom_as_expected(label: str, record: dict, results: Path) -> tuple[bool, str]:
    """Whether a point made to run out of memory left what an OOM must leave: status oom, a reason
    naming the phase and the largest live allocations, and rank 0's allocator snapshot beside it."""
    snapshot = rank0_snapshot(record, results)
    error = record.get("error") or ""
    checks = {
        "status oom": record.get("status") == "oom",
        "phase named": "; in " in error,
        "largest allocations named": "largest live allocations: " in error,
        "snapshot written": snapshot.exists(),
    }
    size = f", {snapshot.stat().st_size / 1e6:.1f} MB" if snapshot.exists() else ""
    verdict = ", ".join(f"{name} ({'yes' if ok else 'no'})" for name, ok in checks.items())
    return all(checks.values()), f"Out of memory on purpose, {label}: {verdict}{size}"


def memory_lines(shown: list[tuple[str, dict]], results: Path) -> list[str]:
    """What the memory forensics left: every OOM's reason and snapshot (f on purpose; c on an 80 GB
    GPU), the history's bound on its cost where a point recorded it and finished, and the tracker's
    categories at the peak beside the measured peak."""
    lines = []
    for label, record in shown:
        spec, metrics = record.get("spec") or {}, record.get("metrics") or {}
        history = get(spec, "profile", "memory_history")
        if record.get("status") == "oom":
            written = rank0_snapshot(record, results).exists()
            lines.append(f"{label}: oom: {record.get('error')}; snapshot {'written' if written else 'none'}")
            if label.endswith(EXPECTED_OOM):
                lines.append(oom_as_expected(label, record, results)[1])
        elif history and record.get("status") == "ok":
            job = metrics.get("job") or {}
            lines.append(
                f"{label}: allocator history through set-up and warm-up; its cost is inside step start-up "
                f"{_num(job.get('step_startup_s'), '.2f')} s and initialization {_num(job.get('initialization_s'), '.2f')} s "
                f"(median step {_num(get(metrics, 'step_time_s', 'median'), '.3f')} s, not under the history)"
            )
        categories = metrics.get("peak_mem_by_category")
        if categories:
            shown_categories = ", ".join(f"{k} {v / GIB:.3f}" for k, v in categories.items() if v)
            allocated = get(metrics, "peak_mem_bytes", "max")  # the timed window's allocator peak
            lines.append(
                f"{label}: FSDP2's memory tracker at its peak, GiB: {shown_categories}; measured peak {_num(allocated, '.3f', 1 / GIB)}"
            )
    return lines


def table(results: Path, plan_path: Path | None, outcomes_path: Path | None, out: Path | None) -> int:
    by_id, notes = load(results)
    plan = read_tsv(plan_path) if plan_path and plan_path.exists() else None
    outcomes = {}
    if outcomes_path and outcomes_path.exists():
        outcomes = {row[0]: (row[1], row[2] if len(row) > 2 else "") for row in read_tsv(outcomes_path) if len(row) > 1}
    rows, shown = build_rows(by_id, plan, outcomes)
    lines = [f"GPU check: {results}", ""]
    lines += markdown(rows, COLUMNS) if rows else ["(no records and no plan: nothing ran)"]
    lines += ["", *comm_lines(shown)]
    lines += ["", *profiled] if (profiled := breakdown_lines(shown)) else []
    lines += ["", *memory] if (memory := memory_lines(shown, results)) else []
    lines += ["", *notes] if notes else []
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    judged = rows[: len(plan)] if plan is not None else rows
    records = dict(shown)
    good = [
        oom_as_expected(row["point"], records[row["point"]], results)[0]
        if row["point"].endswith(EXPECTED_OOM) and row["point"] in records
        else row["status"] == "ok"
        for row in judged
    ]
    return 0 if judged and all(good) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="compose and validate the check's points")
    v.add_argument("points", help="label<TAB>overrides lines, or - for stdin")
    v.add_argument("--plan-out", type=Path)
    e = sub.add_parser("env", help="check the imports the points need (GPU machine)")
    e.add_argument("--imports-only", action="store_true", help="dry run: no GPU or NVML; any failed import fails")
    t = sub.add_parser("table", help="the markdown table of the check's records")
    t.add_argument("results", type=Path)
    t.add_argument("--plan", type=Path)
    t.add_argument("--outcomes", type=Path)
    t.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "validate":
        return validate(read_tsv(args.points), args.plan_out)
    if args.command == "env":
        return env(args.imports_only)
    return table(args.results, args.plan, args.outcomes, args.out)


if __name__ == "__main__":
    sys.exit(main())
