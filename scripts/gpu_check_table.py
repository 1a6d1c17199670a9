"""The Python half of scripts/gpu_check.sh: validate its points before any GPU time, tabulate after.

    gpu_check_table.py validate POINTS [--plan-out PLAN]
        POINTS: lines `label<TAB>override override ...` (`-` reads stdin). Composes and validates
        each point as `fsdp-bench run` would (Hydra + the RunSpec rules), without the local
        launcher's host checks, so CUDA points validate on a CPU machine too. Prints one line per
        point; PLAN gets `label<TAB>point_id<TAB>reason` (point_id `-` when invalid).
        Exit 0 when every point is valid, 2 otherwise.

    gpu_check_table.py env
        On the GPU machine, after the installs: imports every package the points need and prints
        versions, the GPU, torchao (fp8) and whether triton finds a C compiler (train.compile).
        Exit 1 when a required package does not import; torchao is only reported.

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


def env() -> int:
    import importlib
    import importlib.metadata
    import shutil

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

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "(no CUDA device)"
    print(f"cuda {torch.version.cuda}, {torch.cuda.device_count()} device(s): {name}")
    try:
        import torchao

        print("torchao", torchao.__version__)
    except Exception as exc:  # the fp8 point then fails and its record says why
        print(f"torchao does not import ({type(exc).__name__}: {exc}): the fp8 point will fail")
    print("C compiler for triton (train.compile):", shutil.which("cc") or shutil.which("gcc") or "none found")
    return 0


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


def record_row(label: str, record: dict) -> dict[str, str]:
    planned = planned_peak(record)
    note = record.get("error") or get(record, "notes", "mfu") or record.get("_problem")
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
    train = spec.get("train") or spec  # a record that did not validate is shown as read (any version)
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
    lines += ["", *notes] if notes else []
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    judged = rows[: len(plan)] if plan is not None else rows
    return 0 if judged and all(row["status"] == "ok" for row in judged) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="compose and validate the check's points")
    v.add_argument("points", help="label<TAB>overrides lines, or - for stdin")
    v.add_argument("--plan-out", type=Path)
    sub.add_parser("env", help="check the imports the points need (GPU machine)")
    t = sub.add_parser("table", help="the markdown table of the check's records")
    t.add_argument("results", type=Path)
    t.add_argument("--plan", type=Path)
    t.add_argument("--outcomes", type=Path)
    t.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "validate":
        return validate(read_tsv(args.points), args.plan_out)
    if args.command == "env":
        return env()
    return table(args.results, args.plan, args.outcomes, args.out)


if __name__ == "__main__":
    sys.exit(main())
