"""Telemetry readers: NVML (nvidia-ml-py), psutil, InfiniBand/EFA port counters and RAPL.

Each reader is one call that yields some signals (fsdp_core/telemetry_summary.py's SIGNALS). A
reader that cannot start (no library, no device, a counter the driver lacks, no permission) is
left out with a one-line reason; the sampler drops one that fails later. NVML's raw readings are
parsed by pure functions (`parse_nvml`, `field_value`), which the tests feed recorded readings.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# NVLink throughput field ids (nvml.h: KiB, cumulative) and the scope that sums every link.
NVML_FI_NVLINK_DATA_TX, NVML_FI_NVLINK_DATA_RX = 138, 139
NVML_FI_PCIE_COUNT_TX_BYTES, NVML_FI_PCIE_COUNT_RX_BYTES = 197, 198
NVML_ALL_LINKS = 0xFFFFFFFF
NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0


@dataclass
class Reader:
    """One call that yields some signals; `source` names it in the reasons of what is missing.
    `restart`: called when sampling starts (a rate forgets its set-up reading)."""

    source: str
    read: Callable[[], dict[str, float | None]]
    restart: Callable[[], None] | None = None


@dataclass
class Readers:
    """What a sampler reads, and why the rest is missing (source or signal -> one-line reason)."""

    readers: list[Reader] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)

    def extend(self, other: Readers) -> None:
        self.readers += other.readers
        self.missing.update(other.missing)

    def add_tested(
        self, source: str, read: Callable[[], dict[str, float | None]], restart: Callable[[], None] | None = None
    ) -> None:
        """Add a reader that works now; one that fails its first read is left out with the reason."""
        try:
            read()
        except Exception as exc:  # noqa: BLE001 - unsupported or unreadable: say why, sample the rest
            self.missing[source] = reason_of(exc)
            return
        self.readers.append(Reader(source, read, restart))


def reason_of(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}".rstrip(": ")[:300]


class _Rate:
    """Percent from a cumulative CPU-seconds reading: None on the first call after restart(); at
    most `ceiling` (the kernel counts CPU time in 10 ms ticks, so short intervals overshoot)."""

    def __init__(self, scale: float, ceiling: float) -> None:
        self.scale, self.ceiling, self.last = scale, ceiling, None

    def restart(self) -> None:
        self.last = None

    def __call__(self, cpu_s: float) -> float | None:
        now = time.perf_counter()
        last, self.last = self.last, (now, cpu_s)
        if last is None or now <= last[0]:
            return None
        return min(self.ceiling, max(0.0, (cpu_s - last[1]) / (now - last[0]) * self.scale))


def host_readers(device_type: str, cpu_threads: int) -> Readers:
    """psutil: the process's CPU and resident memory, the host's CPU, network bytes per interface."""
    out = Readers()
    try:
        import psutil
    except ImportError as exc:
        out.missing["psutil"] = f"psutil not installed ({exc})"
        return out
    process, cores = psutil.Process(), psutil.cpu_count() or 1
    proc_rate, sys_rate = _Rate(100.0, 100.0 * cores), _Rate(100.0 / cores, 100.0)

    def process_signals() -> dict[str, float | None]:
        with process.oneshot():
            times, rss = process.cpu_times(), process.memory_info().rss
        pct = proc_rate(times.user + times.system)
        values = {"proc_cpu_pct": pct, "proc_rss_bytes": float(rss)}
        if device_type != "cuda":  # a CPU rank's device is its threads
            values["util_pct"] = None if pct is None else min(100.0, pct / max(1, cpu_threads))
        return values

    def system_signals() -> dict[str, float | None]:
        times = psutil.cpu_times()._asdict()
        # Busy = all but idle and I/O wait; guest time is already counted in user time (as psutil does).
        idle = sum(times.get(k, 0.0) for k in ("idle", "iowait", "guest", "guest_nice"))
        return {"sys_cpu_pct": sys_rate(sum(times.values()) - idle)}

    def network_signals() -> dict[str, float | None]:
        values: dict[str, float | None] = {}
        for name, counters in psutil.net_io_counters(pernic=True).items():
            key = _column_part(name)
            values[f"net_{key}_tx_bytes"] = float(counters.bytes_sent)
            values[f"net_{key}_rx_bytes"] = float(counters.bytes_recv)
        return values

    out.add_tested("psutil.process", process_signals, proc_rate.restart)
    out.add_tested("psutil.system", system_signals, sys_rate.restart)
    out.add_tested("psutil.net", network_signals)
    return out


def _column_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "x"


def infiniband_readers(root: Path = Path("/sys/class/infiniband")) -> Readers:
    """Port counters of InfiniBand and EFA devices: `counters/port_{xmit,rcv}_data` (units of 4
    bytes) or, on EFA, `hw_counters/{tx,rx}_bytes`. Skipped with the reason where there are none."""
    out = Readers()
    ports = sorted(root.glob("*/ports/*")) if root.is_dir() else []
    if not ports:
        out.missing["infiniband"] = f"no InfiniBand or EFA ports under {root}"
        return out
    files: list[tuple[str, Path, int]] = []
    for port in ports:
        key = f"ib_{_column_part(port.parent.parent.name)}_{port.name}"
        for direction, standard, efa in (("tx", "port_xmit_data", "tx_bytes"), ("rx", "port_rcv_data", "rx_bytes")):
            if (port / "counters" / standard).exists():
                files.append((f"{key}_{direction}_bytes", port / "counters" / standard, 4))
            elif (port / "hw_counters" / efa).exists():
                files.append((f"{key}_{direction}_bytes", port / "hw_counters" / efa, 1))

    def read() -> dict[str, float | None]:
        return {name: float(int(path.read_text()) * scale) for name, path, scale in files}

    if files:
        out.add_tested("infiniband", read)
    else:
        out.missing["infiniband"] = f"{len(ports)} port(s) under {root} but no byte counters"
    return out


class RaplEnergy:
    """Cumulative CPU package energy (J) from RAPL zones, corrected for each zone's wrap-around."""

    def __init__(self, zones: Sequence[Path]) -> None:
        self.zones = list(zones)
        self.ranges = [int((zone / "max_energy_range_uj").read_text()) for zone in self.zones]
        self.last = [self._raw(zone) for zone in self.zones]
        self.total_uj = 0

    @staticmethod
    def _raw(zone: Path) -> int:
        return int((zone / "energy_uj").read_text())

    def __call__(self) -> dict[str, float | None]:
        for index, zone in enumerate(self.zones):
            raw = self._raw(zone)
            self.total_uj += wrapped_delta(self.last[index], raw, self.ranges[index])
            self.last[index] = raw
        return {"cpu_energy_j": self.total_uj / 1e6}


def wrapped_delta(previous: int, current: int, counter_range: int) -> int:
    """Increase of a counter that wraps to 0 after `counter_range`."""
    return current - previous if current >= previous else current + counter_range - previous


def rapl_readers(root: Path = Path("/sys/class/powercap")) -> Readers:
    """The host's package energy from RAPL (`intel-rapl:N` zones, also on AMD), else the reason."""
    out = Readers()
    zones = (
        sorted(p for p in root.glob("intel-rapl:*") if re.fullmatch(r"intel-rapl:\d+", p.name)) if root.is_dir() else []
    )
    if not zones:
        out.missing["cpu_energy_j"] = f"no RAPL package zones under {root} (no powercap driver, or a VM)"
        return out
    try:
        energy = RaplEnergy(zones)
    except PermissionError:
        out.missing["cpu_energy_j"] = f"RAPL energy_uj under {root} is readable by root only on this host"
        return out
    except (OSError, ValueError) as exc:
        out.missing["cpu_energy_j"] = f"RAPL unreadable: {reason_of(exc)}"
        return out
    out.add_tested("rapl", energy)
    return out


# NVML's raw readings (the units the library returns) -> (signal, scale to the signal's unit).
NVML_RAW = {
    "utilization_gpu_pct": ("util_pct", 1.0),  # nvmlDeviceGetUtilizationRates(h).gpu
    "memory_used_bytes": ("gpu_mem_used_bytes", 1.0),  # nvmlDeviceGetMemoryInfo(h).used
    "power_mw": ("gpu_power_w", 1e-3),  # nvmlDeviceGetPowerUsage: milliwatts
    "total_energy_mj": ("gpu_energy_j", 1e-3),  # nvmlDeviceGetTotalEnergyConsumption: millijoules
    "clock_sm_mhz": ("gpu_sm_clock_mhz", 1.0),  # nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)
    "temperature_gpu_c": ("gpu_temp_c", 1.0),  # nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)
    "clocks_event_reasons": ("gpu_throttle_reasons", 1.0),  # nvmlDeviceGetCurrentClocksEventReasons: bitmask
    "nvlink_data_tx_kib": ("nvlink_tx_bytes", 1024.0),  # field 138, all links: KiB
    "nvlink_data_rx_kib": ("nvlink_rx_bytes", 1024.0),  # field 139
    "pcie_tx_bytes": ("pcie_tx_bytes", 1.0),  # field 197
    "pcie_rx_bytes": ("pcie_rx_bytes", 1.0),  # field 198
}


def parse_nvml(raw: dict[str, float | int | None]) -> dict[str, float | None]:
    """Raw NVML readings (NVML_RAW's keys, NVML's units) as signals in their own units."""
    return {NVML_RAW[key][0]: None if value is None else float(value) * NVML_RAW[key][1] for key, value in raw.items()}


def field_value(value: Any) -> float | None:
    """One nvmlFieldValue_t as a number: its value union read by its valueType; None when its own
    return code is not success (a counter this GPU or driver does not have)."""
    if value.nvmlReturn != 0:
        return None
    # nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
    attribute = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(value.value, attribute.get(int(value.valueType), "ullVal")))


def nvml_readers(device_ids: dict[str, Any]) -> Readers:
    """NVML readers of this rank's GPU, found by UUID, else PCI bus id, else index.

    Every reader is tried once here: one the driver does not support (NOT_SUPPORTED on a MIG slice
    or an older GPU) is left out with its reason."""
    out = Readers()
    try:
        import pynvml as nv
    except ImportError as exc:
        out.missing["nvml"] = f"nvidia-ml-py not installed ({exc})"
        return out
    try:
        nv.nvmlInit()
        handle = _nvml_handle(nv, device_ids)
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, NotFound ...
        out.missing["nvml"] = reason_of(exc)
        return out
    # The clocks "event" reasons replaced the "throttle" reasons (same bits) in newer bindings.
    reasons = (
        getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    calls = {
        "nvml.utilization": lambda: {"utilization_gpu_pct": nv.nvmlDeviceGetUtilizationRates(handle).gpu},
        "nvml.memory": lambda: {"memory_used_bytes": nv.nvmlDeviceGetMemoryInfo(handle).used},
        "nvml.power": lambda: {"power_mw": nv.nvmlDeviceGetPowerUsage(handle)},
        "nvml.energy": lambda: {"total_energy_mj": nv.nvmlDeviceGetTotalEnergyConsumption(handle)},
        "nvml.clock": lambda: {"clock_sm_mhz": nv.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM)},
        "nvml.temperature": lambda: {"temperature_gpu_c": nv.nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU)},
        "nvml.throttle": lambda: {"clocks_event_reasons": reasons(handle)},
        # (field, scope) pairs: NVML_ALL_LINKS sums every NVLink (a bare field id reads link 0 only).
        "nvml.nvlink": _fields(
            nv, handle, {"nvlink_data_tx_kib": (NVML_FI_NVLINK_DATA_TX, NVML_ALL_LINKS),
                         "nvlink_data_rx_kib": (NVML_FI_NVLINK_DATA_RX, NVML_ALL_LINKS)}
        ),
        "nvml.pcie": _fields(
            nv, handle, {"pcie_tx_bytes": NVML_FI_PCIE_COUNT_TX_BYTES, "pcie_rx_bytes": NVML_FI_PCIE_COUNT_RX_BYTES}
        ),
    }  # fmt: skip
    for source, call in calls.items():
        out.add_tested(source, lambda call=call: parse_nvml(call()))
    return out


def update_period(
    read: Callable[[], float], seconds: float, clock: Callable[[], float] = time.perf_counter
) -> tuple[float | None, int]:
    """(median seconds between changes of a counter read in a tight loop for `seconds`, changes seen).

    The median is None below two changes: the counter then updates more slowly than the loop lasted
    (or not at all). NVML documents no update period for its energy counter; the GPU check prints
    this, so a timed window can be sized to get enough ticks."""
    last, changes, started = read(), [], clock()
    while (now := clock()) - started < seconds:
        value = read()
        if value != last:
            last = value
            changes.append(now)
    gaps = sorted(b - a for a, b in zip(changes, changes[1:]))
    return (gaps[len(gaps) // 2] if gaps else None), len(changes)


def nvml_energy_update_period(device_ids: dict[str, Any], seconds: float = 0.5) -> str:
    """One line: how often this GPU's NVML energy counter updates (`update_period`), or why unknown."""
    try:
        import pynvml as nv

        nv.nvmlInit()
        handle = _nvml_handle(nv, device_ids)
        period, changes = update_period(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(handle), seconds)
    except Exception as exc:  # noqa: BLE001 - no library, no driver, no counter: say which
        return f"NVML energy counter: not readable ({reason_of(exc)})"
    if period is None:
        return f"NVML energy counter: {changes} update(s) in {seconds:g} s (slower than the check can time)"
    return f"NVML energy counter updates every ~{period * 1e3:.0f} ms ({changes} updates in {seconds:g} s)"


def _fields(nv, handle, ids: dict[str, Any]) -> Callable[[], dict[str, float | None]]:
    """A reader of NVML field values (raw keys -> field ids); fails when the GPU has none of them."""

    def read() -> dict[str, float | None]:
        values = dict(zip(ids, map(field_value, nv.nvmlDeviceGetFieldValues(handle, list(ids.values())))))
        if all(v is None for v in values.values()):
            raise RuntimeError(f"{', '.join(ids)}: not supported by this GPU or driver")
        return values

    return read


def _nvml_handle(nv, device_ids: dict[str, Any]):
    """This rank's GPU: by UUID (what CUDA calls it, whatever CUDA_VISIBLE_DEVICES), PCI bus id, index."""
    attempts = []
    if device_ids.get("uuid"):
        uuid = str(device_ids["uuid"])
        attempts.append(
            lambda: nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
        )
    if device_ids.get("pci_bus_id"):
        attempts.append(lambda: nv.nvmlDeviceGetHandleByPciBusId(device_ids["pci_bus_id"]))
    if device_ids.get("index") is not None:
        attempts.append(lambda: nv.nvmlDeviceGetHandleByIndex(int(device_ids["index"])))
    error: Exception = RuntimeError("no UUID, PCI bus id or index to find the GPU by")
    for attempt in attempts:
        try:
            return attempt()
        except Exception as exc:  # noqa: BLE001 - try the next way of naming the device
            error = exc
    raise error


def build_readers(device_type: str, cpu_threads: int, device_ids: dict[str, Any] | None = None) -> Readers:
    """Every reader this rank can use: NVML on CUDA, psutil, InfiniBand/EFA ports, RAPL."""
    readers = Readers()
    if device_type == "cuda":
        readers.extend(nvml_readers(device_ids or {}))
    else:
        readers.missing["nvml"] = "CPU device: no GPU signals"
    readers.extend(host_readers(device_type, cpu_threads))
    readers.extend(infiniband_readers())
    readers.extend(rapl_readers())
    return readers
