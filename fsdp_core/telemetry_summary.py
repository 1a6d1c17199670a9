"""Telemetry summaries: what each signal is, and the record's summary of every rank's series.

Pure functions of the series (fsdp_core/telemetry.py gathers them on rank 0): tests feed them
recorded readings. A gauge is summarised by its samples (mean, p10, p90, max); a cumulative
counter by its per-second rate and its total over the window. Host signals (shared by every rank
on a host) count once per host. The summaries are the record's types (bench/schema/telemetry.py):
`SignalSummary`, `RankTelemetry`, `HostTelemetry` and `Telemetry`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.schema.metrics import get
from bench.schema.telemetry import HostTelemetry, RankTelemetry, SignalSummary, Telemetry


@dataclass(frozen=True)
class Signal:
    """One sampled quantity: its unit, whether it is a gauge or a cumulative counter, and whose it is.

    scope: `device` (this rank's GPU), `process` (this rank's process) or `host` (shared by every
    rank on the host: counted once per host in totals). A counter's summary describes its rate, in
    `rate_unit`; its `total` is the difference over the window, in `unit`.
    """

    unit: str
    kind: str = "gauge"  # or "counter"
    scope: str = "device"
    rate_unit: str = ""
    source: str = ""
    meaning: str = ""


SIGNALS: dict[str, Signal] = {
    "util_pct": Signal("%", source="NVML utilization.gpu / psutil",
                       meaning="device utilization: on GPU the share of time a kernel ran (NVML); on CPU the "
                               "rank's process CPU time over its torch threads"),
    "gpu_mem_used_bytes": Signal("B", source="NVML memory info", meaning="device memory in use (all processes)"),
    "gpu_power_w": Signal("W", source="NVML power usage", meaning="board power draw"),
    "gpu_energy_j": Signal("J", "counter", rate_unit="W", source="NVML total energy consumption",
                           meaning="board energy since the driver loaded"),
    "gpu_sm_clock_mhz": Signal("MHz", source="NVML clock info (SM)", meaning="SM clock"),
    "gpu_temp_c": Signal("C", source="NVML temperature (GPU)", meaning="GPU temperature"),
    "gpu_throttle_reasons": Signal("bitmask", source="NVML current clocks event reasons",
                                   meaning="why clocks are below their maximum (summarised as fractions)"),
    "nvlink_tx_bytes": Signal("B", "counter", rate_unit="B/s", source="NVML field values",
                              meaning="NVLink data sent, all links"),
    "nvlink_rx_bytes": Signal("B", "counter", rate_unit="B/s", source="NVML field values",
                              meaning="NVLink data received, all links"),
    "pcie_tx_bytes": Signal("B", "counter", rate_unit="B/s", source="NVML field values",
                            meaning="PCIe bytes sent by the GPU"),
    "pcie_rx_bytes": Signal("B", "counter", rate_unit="B/s", source="NVML field values",
                            meaning="PCIe bytes received by the GPU"),
    "proc_cpu_pct": Signal("%", scope="process", source="psutil", meaning="the rank's process CPU (100 = one core)"),
    "proc_rss_bytes": Signal("B", scope="process", source="psutil", meaning="the rank's resident set size"),
    "sys_cpu_pct": Signal("%", scope="host", source="psutil", meaning="the host's CPU utilization (all cores)"),
    "cpu_energy_j": Signal("J", "counter", scope="host", rate_unit="W", source="RAPL /sys/class/powercap",
                           meaning="CPU package energy of the host (all sockets)"),
}  # fmt: skip
# Per-interface counters: net_<iface>_{tx,rx}_bytes (psutil) and ib_<dev>_<port>_{tx,rx}_bytes (sysfs).
_PATTERNS = (
    (re.compile(r"^net_.+_(tx|rx)_bytes$"), Signal("B", "counter", "host", "B/s", "psutil net_io_counters")),
    (re.compile(r"^ib_.+_(tx|rx)_bytes$"), Signal("B", "counter", "host", "B/s", "/sys/class/infiniband")),
)

# NVML clocks event (throttle) reasons that slow a busy GPU down, by bit (nvml.h's
# nvmlClocksEventReason*). Idle, application clocks, sync boost and display clock are not throttling.
THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}
# A sample with utilization below IDLE_UTIL_PCT counts as idle; a device idle in more than IDLE_SHARE
# of its samples is mostly idle (`idle_devices`). Utilization's flags in the metric catalogue, which the
# report's page quotes.
IDLE_UTIL_PCT = get("utilization").flag("idle_util_pct")
IDLE_SHARE = get("utilization").flag("idle_share")
# A rank's `missing` key when its GPU energy counter exists but did not advance over the window.
ENERGY_FLAT = "gpu_energy_j"
# NVML documents no update period for the energy counter; GPUs update it every ~20-100 ms (some
# as slowly as 10 Hz), so a window under ~1 s gets few ticks or none.
NVML_ENERGY_UPDATE_S = 0.1


def energy_flat_reason(span_s: float) -> str:
    return (
        f"the GPU energy counter did not advance over {span_s:.2f} s of samples (NVML updates it every "
        f"~{NVML_ENERGY_UPDATE_S * 1e3:.0f} ms or slower): the timed window is too short to measure energy"
    )


def signal_info(name: str) -> Signal | None:
    """The definition of a column (None for `t_s` and unknown columns)."""
    if name in SIGNALS:
        return SIGNALS[name]
    for pattern, signal in _PATTERNS:
        if pattern.match(name):
            return signal
    return None


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default method)."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def describe(values: Sequence[float | None], unit: str, **total: float | None) -> SignalSummary | None:
    """mean, p10, p90 and max of the values that are numbers (None when there are none); a counter's
    summary also gets its `total` (a gauge's has none: the record has no such key)."""
    numbers = sorted(v for v in values if v is not None and not math.isnan(v))
    if not numbers:
        return None
    return SignalSummary(
        unit=unit,
        mean=sum(numbers) / len(numbers),
        p10=quantile(numbers, 0.1),
        p90=quantile(numbers, 0.9),
        max=numbers[-1],
        samples=len(numbers),
        **total,
    )


def counter_rates(times: Sequence[float], values: Sequence[float | None]) -> list[float]:
    """Per-second rates between consecutive readings of a cumulative counter (gaps skipped)."""
    points = [(t, v) for t, v in zip(times, values) if v is not None]
    return [(v1 - v0) / (t1 - t0) for (t0, v0), (t1, v1) in zip(points, points[1:]) if t1 > t0]


def counter_total(values: Sequence[float | None]) -> float | None:
    numbers = [v for v in values if v is not None]
    return numbers[-1] - numbers[0] if len(numbers) >= 2 else None


def counter_span(times: Sequence[float], values: Sequence[float | None]) -> float:
    stamps = [t for t, v in zip(times, values) if v is not None]
    return stamps[-1] - stamps[0] if len(stamps) >= 2 else 0.0


def signal_summary(name: str, times: Sequence[float], values: Sequence[float | None]) -> SignalSummary | None:
    """A signal's summary: gauges describe their samples; counters their rate, plus the total."""
    signal = signal_info(name)
    if signal is None or name == "gpu_throttle_reasons":
        return None
    if signal.kind == "gauge":
        return describe(values, signal.unit)
    return describe(counter_rates(times, values), signal.rate_unit, total=counter_total(values))


def throttle_fractions(reasons: Sequence[float | None]) -> tuple[float | None, dict[str, float]]:
    """(share of samples with any throttling reason, share per reason) from NVML bitmasks."""
    masks = [int(v) for v in reasons if v is not None]
    if not masks:
        return None, {}
    any_bit = sum(1 for m in masks if any(m & bit for bit in THROTTLE_BITS)) / len(masks)
    return any_bit, {name: sum(1 for m in masks if m & bit) / len(masks) for bit, name in THROTTLE_BITS.items()}


def _host_owners(payloads: Sequence[dict[str, Any]]) -> set[int]:
    """The rank that speaks for each host's shared signals (the lowest rank on it)."""
    owners: dict[str, int] = {}
    for payload in payloads:
        owners[payload["host"]] = min(owners.get(payload["host"], payload["rank"]), payload["rank"])
    return set(owners.values())


def rank_summary(payload: dict[str, Any]) -> RankTelemetry:
    """One rank's device and process signals, utilization, energy and throttling."""
    columns = payload["columns"]
    times = columns.get("t_s", [])
    signals = {}
    for name, values in columns.items():
        info = signal_info(name)
        if info is not None and info.scope != "host" and (summary := signal_summary(name, times, values)):
            signals[name] = summary
    util = [v for v in columns.get("util_pct", []) if v is not None]
    throttle, _ = throttle_fractions(columns.get("gpu_throttle_reasons", []))
    energy = counter_total(columns.get("gpu_energy_j", []))
    span = counter_span(times, columns.get("gpu_energy_j", []))
    missing = dict(payload.get("missing") or {})
    if energy is not None and energy <= 0:
        # The counter is there but never moved: the window was shorter than its update period. 0 J
        # would read as 0 W; the energy is unmeasured, not zero.
        missing[ENERGY_FLAT] = energy_flat_reason(span)
        energy = None
    sampled_power = signals.get("gpu_power_w")
    power = energy / span if energy is not None and span > 0 else (sampled_power.mean if sampled_power else None)
    return RankTelemetry(
        rank=payload["rank"],
        host=payload["host"],
        device=payload.get("device", ""),
        samples=len(times),
        span_s=times[-1] - times[0] if len(times) >= 2 else 0.0,
        signals=signals,
        util_pct=sum(util) / len(util) if util else None,
        idle_fraction=sum(1 for v in util if v < IDLE_UTIL_PCT) / len(util) if util else None,
        throttle_fraction=throttle,
        energy_j=energy,
        avg_power_w=power,
        sampler_cpu_s=payload.get("sampler_cpu_s"),
        missing=missing,
    )


def host_summary(payload: dict[str, Any], ranks: int) -> HostTelemetry:
    """A host's shared signals (CPU, network, InfiniBand, RAPL), from its lowest rank's series;
    interfaces that carried nothing in the window are left out."""
    columns = payload["columns"]
    times = columns.get("t_s", [])
    signals = {}
    for name, values in columns.items():
        info = signal_info(name)
        if info is None or info.scope != "host" or not (summary := signal_summary(name, times, values)):
            continue
        if info.kind == "counter" and not summary.total and name != "cpu_energy_j":
            continue
        signals[name] = summary
    energy = counter_total(columns.get("cpu_energy_j", []))
    span = counter_span(times, columns.get("cpu_energy_j", []))
    return HostTelemetry(
        host=payload["host"],
        ranks=ranks,
        signals=signals,
        cpu_energy_j=energy,
        cpu_power_w=energy / span if energy is not None and span > 0 else None,
    )


def pooled_signals(payloads: Sequence[dict[str, Any]]) -> dict[str, SignalSummary]:
    """Every signal over all ranks: device and process signals pooled over ranks, host signals over
    hosts (one rank each); counter totals summed the same way."""
    owners = _host_owners(payloads)
    values: dict[str, list[float | None]] = {}
    rates: dict[str, list[float]] = {}
    totals: dict[str, float] = {}
    for payload in payloads:
        columns = payload["columns"]
        times = columns.get("t_s", [])
        for name, column in columns.items():
            info = signal_info(name)
            if (
                info is None
                or name == "gpu_throttle_reasons"
                or (info.scope == "host" and payload["rank"] not in owners)
            ):
                continue
            if info.kind == "gauge":
                values.setdefault(name, []).extend(column)
            else:
                rates.setdefault(name, []).extend(counter_rates(times, column))
                if (total := counter_total(column)) is not None:
                    totals[name] = totals.get(name, 0.0) + total
    out = {}
    for name, column in values.items():
        if summary := describe(column, signal_info(name).unit):
            out[name] = summary
    for name, column in rates.items():
        if (totals.get(name) or name.endswith("energy_j")) and (
            summary := describe(column, signal_info(name).rate_unit, total=totals.get(name))
        ):
            out[name] = summary
    return dict(sorted(out.items()))


def summarize(
    payloads: Sequence[dict[str, Any]],
    *,
    tokens: int,
    window_s: float,
    device_type: str,
    sidecar: str | None = None,
) -> Telemetry:
    """The record's `metrics.telemetry`: per-rank, per-host and pooled summaries, utilization,
    throttling, energy per token and average power, each null with its reason where unmeasured.

    Energy per token = average power over the sampled span (counter difference over its span)
    x the timed window / the tokens of the timed steps: the sampler's first and last readings are
    a few milliseconds inside the window, so the span is scaled to it. On CUDA it is the GPUs'
    board energy (NVML), summed over devices; on CPU the hosts' RAPL package energy, summed over
    hosts; the other one is never mixed in."""
    payloads = sorted(payloads, key=lambda p: p["rank"])
    ranks = [rank_summary(p) for p in payloads]
    owners = _host_owners(payloads)
    hosts = [
        host_summary(p, sum(1 for q in payloads if q["host"] == p["host"])) for p in payloads if p["rank"] in owners
    ]
    missing: dict[str, str] = {}
    for rank in ranks:  # the payload's reasons and the summary's own (a flat energy counter)
        for source, reason in rank.missing.items():
            missing.setdefault(source, f"rank {rank.rank}: {reason}")
    utils = [v for p in payloads for v in p["columns"].get("util_pct", []) if v is not None]
    throttle, reasons = throttle_fractions([v for p in payloads for v in p["columns"].get("gpu_throttle_reasons", [])])
    energy_source, watts, reason = _power(ranks, hosts, device_type)
    energy_j = watts * window_s if watts is not None else None
    energy_per_token = energy_j / tokens if energy_j is not None and tokens > 0 else None
    if energy_per_token is None:
        missing["energy_per_token_j"] = reason or "no timed tokens"
    device_power = [r.avg_power_w for r in ranks]
    avg_power = None
    if device_type == "cuda" and device_power and all(p is not None for p in device_power):
        avg_power = sum(device_power) / len(device_power)
    elif device_type == "cuda":
        missing["avg_power_w_per_device"] = "no GPU power or energy reading on some rank"
    else:
        missing["avg_power_w_per_device"] = (
            "CPU: RAPL measures a host's packages, shared by its ranks (per host: per_host[].cpu_power_w)"
        )
    if throttle is None:
        missing.setdefault("throttle_fraction", "no NVML clocks event reasons (CPU, or not supported)")
    if not utils:
        missing.setdefault("util_pct", "no utilization samples")
    return Telemetry(
        interval_ms=payloads[0].get("interval_ms") if payloads else None,
        window_s=window_s,
        ranks=len(payloads),
        samples=sum(r.samples for r in ranks),
        sampler_cpu_s=_sum_known([r.sampler_cpu_s for r in ranks]),
        sidecar=sidecar,
        util_pct=sum(utils) / len(utils) if utils else None,
        idle_devices=sum(1 for r in ranks if (r.idle_fraction or 0.0) > IDLE_SHARE),
        throttle_fraction=throttle,
        throttle_reasons=reasons,
        energy_source=energy_source,
        energy_j=energy_j,
        energy_per_token_j=energy_per_token,
        avg_power_w_per_device=avg_power,
        signals=pooled_signals(payloads),
        per_rank=ranks,
        per_host=hosts,
        missing=missing,
    )


def _power(
    ranks: list[RankTelemetry], hosts: list[HostTelemetry], device_type: str
) -> tuple[str | None, float | None, str | None]:
    """(energy source, total watts from the energy counters, reason when unmeasured).

    CUDA: every GPU's board energy counter (NVML) over its span, summed; CPU: every host's RAPL
    package energy over its span, summed. Sampled power readings never stand in for a counter."""
    if device_type == "cuda":
        # A counter that exists but did not advance (a window shorter than its update period) is
        # told apart from one the GPU or driver does not have.
        flat = [r.rank for r in ranks if r.energy_j is None and ENERGY_FLAT in r.missing]
        absent = [r.rank for r in ranks if (r.energy_j is None or not r.avg_power_w) and r.rank not in flat]
        reasons = [f"GPU energy counter unavailable on rank(s) {_ranks(absent)}"] if absent or not ranks else []
        if flat:
            reasons.append(
                f"GPU energy counter did not advance on rank(s) {_ranks(flat)} (window "
                f"{max(r.span_s for r in ranks if r.rank in flat):.2f} s; NVML updates it every ~{NVML_ENERGY_UPDATE_S * 1e3:.0f} ms "
                "or slower: a longer timed window is needed)"
            )
        if reasons:
            return None, None, "; ".join(reasons)
        return "gpu", sum(r.avg_power_w for r in ranks), None
    lacking = [h.host for h in hosts if h.cpu_power_w is None]
    if lacking or not hosts:
        return None, None, f"CPU: no RAPL package energy on {', '.join(lacking[:3])} (see missing.cpu_energy_j)"
    return "cpu-package", sum(h.cpu_power_w for h in hosts), None


def _sum_known(values: list[float | None]) -> float | None:
    return sum(values) if values and all(v is not None for v in values) else None


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
