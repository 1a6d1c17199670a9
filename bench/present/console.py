"""Console output of results: a point's summary and the sweep's table. Formatting only."""

from __future__ import annotations

from bench.schema.record import RunResult
from bench.schema.units import human_bytes


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def telemetry_line(t) -> str:
    """Utilization, power, energy per token and throttling in one line (metrics.telemetry)."""
    energy = (
        f"{t.energy_per_token_j:.4g} J/token ({t.energy_source})"
        if t.energy_per_token_j is not None
        else f"energy/token - ({t.missing.get('energy_per_token_j', 'not measured')})"
    )
    power = f"{t.avg_power_w_per_device:,.0f} W/device, " if t.avg_power_w_per_device is not None else ""
    throttle = f", throttled {t.throttle_fraction * 100:.0f}% of samples" if t.throttle_fraction else ""
    return (
        f"  telemetry: utilization {fmt(t.util_pct)}%, {power}{energy}{throttle}; "
        f"{t.samples} samples, series in {t.sidecar or '-'}"
    )


def point_summary(record: RunResult, path: str | None = None) -> str:
    """A few lines a person reads after `fsdp-bench run`."""
    s, m = record.spec, record.metrics
    head = (
        f"point {record.point_id}  {s.model.name} nodes={s.nodes} gpus_per_node={s.gpus_per_node} "
        f"{s.strategy} {s.precision}  status={record.status}"
    )
    lines = [head]
    if record.error:
        lines.append(f"  error: {record.error}")
    if m.tokens_per_s is not None and m.step_time_s is not None:
        st = m.step_time_s
        lines += [
            f"  tokens/s: {m.tokens_per_s:,.0f} global, {m.tokens_per_s_per_device:,.0f} per device",
            f"  step time: median {st.median * 1e3:.1f} ms (p10 {st.p10 * 1e3:.1f}, p90 {st.p90 * 1e3:.1f}, "
            f"cv {st.cv:.3f}) over {len(m.step_times_s)} timed steps",
            f"  MFU: {fmt(m.mfu and m.mfu * 100)}%  HFU: {fmt(m.hfu and m.hfu * 100)}%  "
            f"achieved {fmt(m.tflops_per_device, '.3f')} TFLOP/s per device"
            + (f"  ({record.notes['mfu']})" if m.mfu is None and "mfu" in record.notes else ""),
        ]
    if m.peak_mem_bytes is not None:
        lines.append(f"  peak memory: {human_bytes(m.peak_mem_bytes.max)} (max over ranks)")
    if m.comm_bytes_per_step is not None:
        c = m.comm_bytes_per_step
        lines.append(
            f"  comm per step: all-gather {human_bytes(c.all_gather)}, reduce-scatter "
            f"{human_bytes(c.reduce_scatter)}, all-reduce {human_bytes(c.all_reduce)}"
        )
    if m.loss_first is not None:
        lines.append(f"  loss: {m.loss_first:.4f} -> {m.loss_last:.4f}")
    if m.telemetry is not None:
        lines.append(telemetry_line(m.telemetry))
    if m.checkpoint is not None:
        lines += checkpoint_lines(m.checkpoint)
    if path:
        lines.append(f"  record: {path}")
    return "\n".join(lines)


def checkpoint_lines(ckpt) -> list[str]:
    """metrics.checkpoint in three lines: saves (medians), the load after the run, goodput."""
    import statistics

    lines = []
    if ckpt.resumed is not None:
        lines.append(f"  resumed from step {ckpt.resumed.step} (load {ckpt.resumed.load_s:.2f} s)")
    if ckpt.saves:
        saves = ckpt.saves
        rate = statistics.median(s.write_bytes_per_s or 0.0 for s in saves)
        lines.append(
            f"  checkpoint: {len(saves)} {ckpt.mode} saves of {human_bytes(saves[-1].bytes)}, median blocked "
            f"{statistics.median(s.blocked_s for s in saves):.3f} s, durable {statistics.median(s.durable_s for s in saves):.3f} s, "
            f"write {human_bytes(rate)}/s"
        )
    if ckpt.load is not None:
        load = ckpt.load
        lines.append(f"  load of step {load.step}: {load.load_s:.3f} s, read {human_bytes(load.read_bytes_per_s)}/s")
    if ckpt.goodput is not None:
        lines.append(
            f"  goodput: {ckpt.goodput * 100:.1f}% of the step-time median's tokens/s over the timed window "
            f"(saves blocked {fmt(ckpt.blocked_fraction and ckpt.blocked_fraction * 100)}% of it)"
        )
    return lines


def sweep_table(records) -> str:
    """The end-of-sweep table: point, configuration, status, tokens/s, scaling efficiency, and after it
    why an efficiency is suspect (bench/analysis/report/contention.py: contention) where it is."""
    efficiency, note = _efficiencies(records)
    header = f"{'point':<16}{'model':<12}{'nodes':>6}{'gpn':>4}  {'strategy':<19}{'precision':<10}{'status':<12}{'tokens/s':>12}{'eff':>8}"
    lines = [note] if note else []
    lines += [header, "-" * len(header)]
    for r in records:
        s, tps = r.spec, r.metrics.tokens_per_s
        eff, suspect = efficiency.get(r.point_id, (None, None))
        label = s.point_id + (f"/r{s.repeat}" if s.repeat else "")
        lines.append(
            f"{label:<13}{s.model.name:<12}{s.nodes:>6}{s.gpus_per_node:>4}  {s.strategy:<19}{s.precision:<10}"
            f"{r.status:<12}{(f'{tps:,.0f}' if tps else '-'):>12}{(f'{eff:.0%}' if eff is not None else '-'):>8}"
            + (f"  {suspect}" if suspect else "")
        )
    return "\n".join(lines)


def sweep_overhead_line(records, ran, wall_s: float) -> str | None:
    """Sweep overhead = wall time / time spent in timed steps, over the points run now (launch costs show here)."""
    ran = set(ran)
    timed = sum(r.metrics.timed_window_s or 0.0 for r in records if r.point_id in ran)
    if timed <= 0:
        return None
    return f"sweep overhead: {wall_s:.1f} s wall / {timed:.1f} s timed = {wall_s / timed:.1f}x"


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
