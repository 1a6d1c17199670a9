"""What `fsdp-bench sweep` prints and writes for people: its heading, the outcome (points skipped,
job files rendered, the table), the closing summary, and the report in the sweep folder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from reports.console import sweep_overhead_line, sweep_table
from reports.plan import autotune_lines
from reports.report.breakdown import record_lines as breakdown_lines


def heading_lines(sweep) -> list[str]:
    """Before anything runs: the autotuned ranking, if any, and where the sweep's records go."""
    lines = autotune_lines(sweep.autotuned) if sweep.autotuned else []
    repeats = sweep.settings.repeats
    return [*lines, f"sweep {sweep.name}: {len(sweep.points)} point(s) x {repeats} repeat(s) -> {sweep.folder}"]


def ranked_lines(line: str, ranked) -> list[str]:
    """An autotuned sweep's preflight decided the ranking: its line, then the new ranking, if any."""
    return [line, *(autotune_lines(ranked) if ranked is not None else [])]


def outcome_lines(outcome) -> list[str]:
    """Points the ledger skipped, job files rendered instead of run, the table of every record and
    the profiled points' split."""
    lines = [f"  skipped {decision.spec.point_id}: {decision.reason}" for decision in outcome.skipped]
    if outcome.rendered:
        lines.append(f"{len(outcome.rendered)} job file(s) rendered, nothing ran (launcher.apply=false):")
        lines += [f"  {path}" for path in outcome.rendered]
    if outcome.records:
        lines.append(sweep_table(outcome.records))
        lines += breakdown_lines(outcome.records)
    return lines


def summary_lines(outcome, name: str) -> list[str]:
    """The closing lines: how many points are ok, the wall time, the harness's overhead."""
    if outcome.interrupted:
        return [f"interrupted: {len(outcome.ran)} point(s) recorded in this run; run the same command to continue"]
    n_bad = sum(r.status != "ok" for r in outcome.records)
    lines = [f"sweep {name}: {len(outcome.records) - n_bad} ok, {n_bad} not ok, wall {outcome.wall_s:.1f} s"]
    if line := sweep_overhead_line(outcome.records, outcome.ran, outcome.wall_s):
        lines.append(line)
    return lines


def write_sweep_report(records, results_dir: Path, name: str, overrides: list[str]) -> Path:
    """The sweep's report in `<results_dir>/<name>/report/`, with the command that reproduces it and
    the sweep's preflights (one that cannot be read is named on stderr)."""
    from bench.analysis.preflight import load_preflights
    from bench.schema.protocol import point_dir
    from reports.report.build import write_report

    command = "fsdp-bench sweep " + " ".join(shlex.quote(o) for o in overrides)
    dirs = {(r.sweep, r.point_id): point_dir(results_dir, r.spec) for r in records}
    preflights, unreadable = load_preflights(results_dir / name)
    for path, reason in unreadable:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    return write_report(
        records, results_dir / name / "report", reproduce=[command.strip()], point_dirs=dirs, preflights=preflights
    )


DRY_RUN_HEADERS = ("#", "point", "point id", "repeat", "ledger", "launch", "fits", "mem GiB/dev", "step s", "tok/s")


def dry_run_lines(sweep, dry) -> list[str]:
    """`sweep --dry-run`: the heading, one row per point run (the ledger's decision in its own words,
    the launch it joins, the planner's prediction), the launches, and whether it would start now."""
    from bench.schema.labels import point_label
    from bench.schema.units import GIB
    from reports.check.table import text_table

    rows = []
    for index, run in enumerate(dry.runs):
        spec, plan = run.decision.spec, run.prediction
        ledger = run.decision.reason
        if run.planned_skip:
            ledger += "; skipped: predicted not to fit (sweep.plan=true)"
        rows.append(
            [
                str(index),
                point_label(spec),
                spec.point_id,
                str(spec.repeat),
                ledger,
                "-" if run.launch is None else str(run.launch + 1),
                "yes" if plan["fits"] else "no",
                f"{plan['memory_bytes_per_device']['total'] / GIB:.2f}",
                f"{plan['step_time_s']:.4g}",
                f"{plan['tokens_per_s']:,.0f}",
            ]
        )
    launches: dict[int, list] = {}
    for run in dry.runs:
        if run.launch is not None:
            launches.setdefault(run.launch, []).append(run.decision.spec)
    lines = [*heading_lines(sweep), text_table(rows, DRY_RUN_HEADERS)]
    grouped = "" if sweep.settings.group_launches else " (sweep.group_launches=false: one launch per point)"
    lines.append(f"{len(launches)} launch(es){grouped}:")
    for index, specs in sorted(launches.items()):
        first = specs[0]
        lines.append(
            f"  {index + 1}: launcher={first.launcher} nodes={first.nodes} gpus_per_node={first.gpus_per_node}: "
            f"{len(specs)} point run(s)"
        )
    if sweep.options.wait:  # else the command refuses, as the sweep would
        lines += [f"waits for: {holder} (sweep.wait)" for holder in dry.waits_for]
    pending = sum(run.launch is not None for run in dry.runs)
    lines.append(f"dry run: {pending} of {len(dry.runs)} point run(s) would run; nothing launched, nothing written")
    return lines


def dry_run_objects(dry) -> list[dict]:
    """`sweep --dry-run --json`: each point run's plan object (`plan --json`'s shape) with the
    ledger's decision and its launch added."""
    from bench.analysis.planner.plan_object import plan_object

    objects = []
    for run in dry.runs:
        spec = run.decision.spec
        prediction = {k: v for k, v in run.prediction.items() if k != "point_id"}
        objects.append(
            plan_object(
                spec.point_id,
                prediction,
                repeat=spec.repeat,
                ledger={
                    "runs": run.launch is not None,
                    "reason": run.decision.reason,
                    "planned_skip": run.planned_skip,
                },
                launch=None if run.launch is None else run.launch + 1,
            )
        )
    return objects
