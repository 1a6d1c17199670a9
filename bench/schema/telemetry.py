"""`metrics.telemetry` of a record: what the devices and hosts did during the timed steps (docs/telemetry.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.schema.base import Strict


class SignalSummary(Strict):
    """One sampled signal over the timed window: a gauge's samples, or a cumulative counter's
    per-second rate (in `unit`, e.g. W for an energy counter) plus its `total` (difference)."""

    unit: str
    mean: float
    p10: float
    p90: float
    max: float
    samples: int
    total: float | None = None


class RankTelemetry(Strict):
    """One rank's device and process signals (fsdp_core/telemetry_summary.py's rank_summary)."""

    rank: int
    host: str
    device: str = ""
    samples: int
    span_s: float
    signals: dict[str, SignalSummary] = Field(default_factory=dict)
    util_pct: float | None = None
    idle_fraction: float | None = None
    throttle_fraction: float | None = None
    energy_j: float | None = None
    avg_power_w: float | None = None
    sampler_cpu_s: float | None = None
    missing: dict[str, str] = Field(default_factory=dict)


class HostTelemetry(Strict):
    """One host's shared signals (CPU, network, InfiniBand/EFA, RAPL), read by its lowest rank."""

    host: str
    ranks: int
    signals: dict[str, SignalSummary] = Field(default_factory=dict)
    cpu_energy_j: float | None = None
    cpu_power_w: float | None = None


class Telemetry(Strict):
    """What the devices and hosts did during the timed steps (docs/telemetry.md); `missing` says
    why a null field or an absent signal was not measured. `sidecar`: the raw series' file, next
    to result.json."""

    interval_ms: int | None = None
    window_s: float
    ranks: int
    samples: int
    sampler_cpu_s: float | None = None  # CPU time the sampling threads used, summed over ranks
    sidecar: str | None = None
    util_pct: float | None = None
    idle_devices: int = 0
    throttle_fraction: float | None = None
    throttle_reasons: dict[str, float] = Field(default_factory=dict)
    energy_source: Literal["gpu", "cpu-package"] | None = None
    energy_j: float | None = None
    energy_per_token_j: float | None = None
    avg_power_w_per_device: float | None = None
    signals: dict[str, SignalSummary] = Field(default_factory=dict)
    per_rank: list[RankTelemetry] = Field(default_factory=list)
    per_host: list[HostTelemetry] = Field(default_factory=list)
    missing: dict[str, str] = Field(default_factory=dict)
