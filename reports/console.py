"""Console output of results: a point's summary and the sweep's table. Formatting only.

Both list the metrics the catalogue shows there (bench/schema/metrics.py: views "console" and "sweep"),
with its labels and display formats: a metric added to the catalogue appears without an edit here.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.schema.metrics import get, shown_in
from bench.schema.record import RunResult

ENERGY = get("energy_per_token")


def point_summary(record: RunResult, path: str | None = None) -> str:
    """A few lines a person reads after `fsdp-bench run`: one line per group of the catalogue's metrics."""
    s = record.spec
    head = (
        f"point {record.point_id}  {s.model.name} nodes={s.nodes} gpus_per_node={s.gpus_per_node} "
        f"{s.strategy} {s.precision}  status={record.status}"
    )
    lines = [head]
    if record.error:
        lines.append(f"  error: {record.error}")
    if record.metrics.checkpoint is not None and record.metrics.checkpoint.resumed is not None:
        resumed = record.metrics.checkpoint.resumed
        lines.append(f"  resumed from step {resumed.step} (load {resumed.load_s:.2f} s)")
    lines += metric_lines(record)
    if path:
        lines.append(f"  record: {path}")
    return "\n".join(lines)


def metric_lines(record: RunResult) -> list[str]:
    """`  group: label value, label value` per catalogue group that measured something, and what the
    record says beside (why MFU or energy is null, the telemetry's samples and series file)."""
    groups: dict[str, list[str]] = {}
    for metric in shown_in("console"):
        value = metric.value(record)
        if value is not None:
            groups.setdefault(metric.group, []).append(f"{metric.label} {metric.display.text(value)}")
    for group, extra in _EXTRAS.items():
        if parts := extra(record):
            groups.setdefault(group, []).extend(parts)
    return [f"  {group}: {', '.join(parts)}" for group, parts in groups.items() if parts]


def _step_count(record: RunResult) -> list[str]:
    steps = len(record.metrics.step_times_s)
    return [f"over {steps} timed steps"] if steps else []


def _mfu_note(record: RunResult) -> list[str]:
    note = record.notes.get("mfu")
    return [f"MFU - ({note})"] if record.metrics.mfu is None and note and record.metrics.step_times_s else []


def _telemetry(record: RunResult) -> list[str]:
    t = record.metrics.telemetry
    if t is None:
        return []
    energy = (
        [f"from {t.energy_source}"]
        if ENERGY.value(record) is not None
        else [f"{ENERGY.label} - ({t.missing.get(ENERGY.field, 'not measured')})"]
    )
    return [*energy, f"{t.samples} samples, series in {t.sidecar or '-'}"]


def _checkpoint(record: RunResult) -> list[str]:
    ckpt = record.metrics.checkpoint
    return [f"{ckpt.mode} every {ckpt.every} steps"] if ckpt is not None and ckpt.saves else []


def _step_split(record: RunResult) -> list[str]:
    """The split's detail beside its metrics: exposed communication by collective, idle's named parts,
    the profiled steps and their traces."""
    b = record.metrics.step_breakdown
    if b is None:
        return []
    parts = []
    if b.step_s:
        kinds = ", ".join(f"{kind} {value / b.step_s:.1%}" for kind, value in b.exposed_comm_s_by_kind.items() if value)
        parts += [f"exposed by collective: {kinds}"] if kinds else []
    named = [f"{label} {value * 1e3:.1f} ms" for label, value in (("FSDP", b.fsdp_s), ("barrier", b.barrier_s))
             if value is not None]  # fmt: skip
    parts += [f"idle in {' and '.join(named)}"] if named else []
    traces = f"traces {b.traces[0]}" + (f" .. {b.traces[-1]}" if len(b.traces) > 1 else "") if b.traces else "no traces"
    return [*parts, f"over {b.steps} profiled step{'s' if b.steps != 1 else ''}, {traces}"]


_EXTRAS: dict[str, Callable[[RunResult], list[str]]] = {
    "step time": _step_count,
    "compute": _mfu_note,
    "telemetry": _telemetry,
    "checkpoint": _checkpoint,
    "step split": _step_split,
}


def sweep_table(records) -> str:
    """The end-of-sweep table: point, configuration, status, the catalogue's sweep metrics (tokens/s,
    scaling efficiency), and after them why an efficiency is suspect (bench/analysis/report/contention.py:
    contention) where it is."""
    efficiency, note = _efficiencies(records)
    columns = shown_in("sweep")
    widths = [max(8, len(m.heading) + 4) for m in columns]
    header = f"{'point':<16}{'model':<12}{'nodes':>6}{'gpn':>4}  {'strategy':<19}{'precision':<10}{'status':<12}"
    header += "".join(f"{m.heading:>{w}}" for m, w in zip(columns, widths, strict=True))
    lines = [note] if note else []
    lines += [header, "-" * len(header)]
    for r in records:
        s = r.spec
        eff, suspect = efficiency.get(r.point_id, (None, None))
        label = s.point_id + (f"/r{s.repeat}" if s.repeat else "")
        cells = [m.display.text(eff if m.path is None else m.value(r) or None) for m in columns]
        lines.append(
            f"{label:<13}{s.model.name:<12}{s.nodes:>6}{s.gpus_per_node:>4}  {s.strategy:<19}{s.precision:<10}"
            f"{r.status:<12}"
            + "".join(f"{cell:>{w}}" for cell, w in zip(cells, widths, strict=True))
            + (f"  {suspect}" if suspect else "")
        )
    return "\n".join(lines)


def sweep_overhead_line(records, ran, wall_s: float) -> str | None:
    """Sweep overhead = wall time / time spent in timed steps, over the points run now (launch costs show here)."""
    ran = set(ran)
    timed = sum(r.metrics.timed_window_s or 0.0 for r in records if r.point_id in ran)
    if timed <= 0:
        return None
    line = f"sweep overhead: {wall_s:.1f} s wall / {timed:.1f} s timed = {wall_s / timed:.1f}x"
    jobs = [r.metrics.job for r in records if r.point_id in ran and r.metrics.job is not None]
    if jobs:  # where the points' own walls went (metrics.job, docs/reliability.md)
        parts = {
            "start-up": sum(j.startup_s or 0.0 for j in jobs),
            "saves": sum(j.checkpoint_save_s for j in jobs),
            "lost": sum(j.lost_s or 0.0 for j in jobs),
            "productive": sum(j.productive_s for j in jobs),
        }
        line += " (points: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in parts.items()) + ")"
    return line


def _efficiencies(records) -> tuple[dict[str, tuple[float, str | None]], str | None]:
    """Per-point scaling efficiency and the contention rule's verdict on it, from the report's
    aggregation (one implementation), and a note when they could not be computed (the table prints anyway)."""
    try:
        from bench.analysis.report.views import analyse

        points = analyse(records).points
    except Exception as exc:  # noqa: BLE001 - the table must print even if aggregation cannot
        return {}, f"(scaling efficiency unavailable: {exc})"
    rows = zip(points["point_id"], points["scaling_efficiency"], points["contention"])
    suspect = {pid: why if isinstance(why, str) else None for pid, _, why in rows}
    return {pid: (float(eff), suspect[pid]) for pid, eff in zip(points["point_id"], points["scaling_efficiency"])
            if eff == eff and eff is not None}, None  # fmt: skip
