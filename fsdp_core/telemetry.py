"""Telemetry: what this rank's device and host did during the timed steps.

A daemon thread samples every `telemetry.interval_ms` from the first timed step to the last
(fsdp_core/train.py starts it when the timed window opens and stops it after the closing device
sync). It never touches torch or the CUDA stream, so it never syncs the device; its readers are
NVML (nvidia-ml-py), psutil, /sys/class/infiniband and /sys/class/powercap (RAPL). Every reader
that cannot start, or fails mid-run, is dropped with its reason and the others go on: a failing
sampler never fails the point, and the record says what is missing and why.

After the loop every rank's series goes to rank 0 (`gather_telemetry`, outside the timed window),
which writes them to a sidecar next to result.json (Parquet where pyarrow imports, else CSV) and
summarises them for the record (`summarize`). Everything here but the gather is torch-free, and
the parsing and summaries are pure functions of recorded readings (tests feed them NVML's raw
units).

Series columns: `t_s` (seconds since the sampler started), then one column per signal (SIGNALS;
`net_<iface>_{tx,rx}_bytes` and `ib_<device>_<port>_{tx,rx}_bytes` per interface). Counters are
stored as their raw cumulative readings; summaries take differences (totals) and rates.
"""

from __future__ import annotations

import csv
import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp_core.protocol import TELEMETRY_CSV, TELEMETRY_PARQUET


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
# A sample with utilization below this counts as idle (a device idle in most samples is flagged).
IDLE_UTIL_PCT = 10.0
# NVLink throughput field ids (nvml.h: KiB, cumulative) and the scope that sums every link.
NVML_FI_NVLINK_DATA_TX, NVML_FI_NVLINK_DATA_RX = 138, 139
NVML_FI_PCIE_COUNT_TX_BYTES, NVML_FI_PCIE_COUNT_RX_BYTES = 197, 198
NVML_ALL_LINKS = 0xFFFFFFFF
NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0


def signal_info(name: str) -> Signal | None:
    """The definition of a column (None for `t_s` and unknown columns)."""
    if name in SIGNALS:
        return SIGNALS[name]
    for pattern, signal in _PATTERNS:
        if pattern.match(name):
            return signal
    return None


# --- readers --------------------------------------------------------------------------------


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
            self.missing[source] = _reason(exc)
            return
        self.readers.append(Reader(source, read, restart))


def _reason(exc: BaseException) -> str:
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
        out.missing["cpu_energy_j"] = f"RAPL unreadable: {_reason(exc)}"
        return out
    out.add_tested("rapl", energy)
    return out


# --- NVML -----------------------------------------------------------------------------------


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
        out.missing["nvml"] = _reason(exc)
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


# --- the sampler ----------------------------------------------------------------------------


class Sampler:
    """A daemon thread reading every reader every `interval_ms`, from start() to stop().

    Never syncs the device: its readers are driver and kernel counters only. The first sample is
    taken as the thread starts and the last one at stop(), so counters span the whole window."""

    # How long stop() waits for a sample stuck in a driver call before giving up on the thread.
    STOP_GRACE_S = 5.0

    def __init__(self, interval_ms: int, readers: Readers, meta: dict[str, Any]) -> None:
        self.interval_s = interval_ms / 1000.0
        self.interval_ms = interval_ms
        self.readers = list(readers.readers)
        self.missing = dict(readers.missing)
        self.meta = meta
        self.rows: list[dict[str, float | None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.start_unix: float | None = None
        self.thread_cpu_s: float | None = None  # CPU time the sampling thread used: its own cost

    def start(self) -> None:
        for reader in self.readers:
            if reader.restart is not None:
                reader.restart()
        self._t0, self.start_unix = time.perf_counter(), time.time()
        self._thread = threading.Thread(target=self._run, name="fsdp-bench-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Stop sampling (one last sample first) and return this rank's series."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(max(self.STOP_GRACE_S, 4 * self.interval_s))
            if self._thread.is_alive():
                self.missing["sampler"] = f"the sampling thread did not stop within {self.STOP_GRACE_S:g} s"
        with self._lock:
            rows = list(self.rows)
        return {
            **self.meta,
            "interval_ms": self.interval_ms,
            "start_unix": self.start_unix,
            "columns": rows_to_columns(rows),
            "missing": dict(self.missing),
            "sampler_cpu_s": self.thread_cpu_s,
        }

    def _run(self) -> None:
        try:
            deadline = time.perf_counter()
            while True:
                self._sample()
                deadline += self.interval_s
                # Behind schedule (a slow read): skip the missed ticks rather than sample in a burst.
                deadline = max(deadline, time.perf_counter())
                if self._stop.wait(deadline - time.perf_counter()):
                    self._sample()
                    return
        except Exception as exc:  # noqa: BLE001 - the point goes on; the record says sampling stopped
            self.missing["sampler"] = f"sampling stopped after {time.perf_counter() - self._t0:.1f} s: {_reason(exc)}"
        finally:
            self.thread_cpu_s = time.thread_time()

    def _sample(self) -> None:
        row: dict[str, float | None] = {"t_s": time.perf_counter() - self._t0}
        for reader in list(self.readers):
            try:
                row.update(reader.read())
            except Exception as exc:  # noqa: BLE001 - a vanished counter or a lost GPU: keep the rest
                self.readers.remove(reader)
                self.missing[reader.source] = f"failed after {row['t_s']:.1f} s (earlier samples kept): {_reason(exc)}"
        with self._lock:
            self.rows.append(row)


def rows_to_columns(rows: Sequence[dict[str, float | None]]) -> dict[str, list[float | None]]:
    """Sample rows as columns (t_s first); a signal absent from a row is None there."""
    names = dict.fromkeys(["t_s"])  # an ordered set
    for row in rows:
        names.update(dict.fromkeys(row))
    return {name: [row.get(name) for row in rows] for name in names}


def prepare_sampler(
    interval_ms: int | None, device_type: str, cpu_threads: int, device_ids: dict[str, Any] | None, meta: dict
) -> Sampler | None:
    """A ready (not yet started) sampler, or None when telemetry is off. Reader set-up (NVML init,
    psutil priming) happens here, before the timed window."""
    if not interval_ms:
        return None
    try:
        readers = build_readers(device_type, cpu_threads, device_ids)
    except Exception as exc:  # noqa: BLE001 - never fail the point for telemetry
        readers = Readers(missing={"sampler": f"could not set up the readers: {_reason(exc)}"})
    return Sampler(interval_ms, readers, meta)


# --- gathering and the sidecar ----------------------------------------------------------------


def gather_telemetry(series: dict[str, Any] | None, point_dir: Path, summary_args: dict[str, Any]) -> dict | None:
    """Every rank's series to rank 0 (a collective: every rank calls it), which writes the sidecar
    and returns the record's telemetry section; other ranks get None. Outside the timed window."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(series, gathered, dst=0)
    if rank != 0 or gathered is None:
        return None
    payloads = [p for p in gathered if p is not None]
    if not payloads:
        return None
    missing = {}
    try:
        sidecar = write_sidecar(Path(point_dir), payloads)
    except Exception as exc:  # noqa: BLE001 - the summary still goes into the record
        sidecar, missing = None, {"sidecar": f"could not write the series: {_reason(exc)}"}
    summary = summarize(payloads, sidecar=sidecar, **summary_args)
    summary["missing"].update(missing)
    return summary


def sidecar_table(payloads: Sequence[dict[str, Any]]) -> dict[str, list]:
    """Every rank's rows stacked: rank, host, then t_s and every signal column (None where absent)."""
    names: dict[str, None] = {}  # an ordered set
    for payload in payloads:
        names.update(dict.fromkeys(payload["columns"]))
    table: dict[str, list] = {"rank": [], "host": [], **{name: [] for name in names}}
    for payload in payloads:
        columns = payload["columns"]
        length = len(columns.get("t_s", []))
        table["rank"] += [payload["rank"]] * length
        table["host"] += [payload["host"]] * length
        for name in names:
            table[name] += columns.get(name, [None] * length)
    return table


def write_sidecar(point_dir: Path, payloads: Sequence[dict[str, Any]], parquet: bool | None = None) -> str:
    """Write the series next to result.json (Parquet where pyarrow imports, else CSV); its file name."""
    table = sidecar_table(payloads)
    if parquet is None:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            parquet = False
        else:
            parquet = True
    point_dir.mkdir(parents=True, exist_ok=True)
    name = TELEMETRY_PARQUET if parquet else TELEMETRY_CSV
    tmp = point_dir / f".{name}.{os.getpid()}.tmp"
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"rank": pa.int32(), "host": pa.string()}
        arrays = {k: pa.array(v, type=types.get(k, pa.float64())) for k, v in table.items()}
        pq.write_table(pa.table(arrays), tmp)
    else:
        with tmp.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(table)
            writer.writerows(zip(*[[("" if v is None else v) for v in col] for col in table.values()]))
    tmp.replace(point_dir / name)
    return name


# --- summaries ------------------------------------------------------------------------------


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default method)."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def describe(values: Sequence[float | None], unit: str) -> dict[str, Any] | None:
    """mean, p10, p90 and max of the values that are numbers (None when there are none)."""
    numbers = sorted(v for v in values if v is not None and not math.isnan(v))
    if not numbers:
        return None
    return {
        "unit": unit,
        "mean": sum(numbers) / len(numbers),
        "p10": quantile(numbers, 0.1),
        "p90": quantile(numbers, 0.9),
        "max": numbers[-1],
        "samples": len(numbers),
    }


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


def signal_summary(name: str, times: Sequence[float], values: Sequence[float | None]) -> dict[str, Any] | None:
    """A signal's summary: gauges describe their samples; counters their rate, plus the total."""
    signal = signal_info(name)
    if signal is None or name == "gpu_throttle_reasons":
        return None
    if signal.kind == "gauge":
        return describe(values, signal.unit)
    summary = describe(counter_rates(times, values), signal.rate_unit)
    if summary is not None:
        summary["total"] = counter_total(values)
    return summary


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


def rank_summary(payload: dict[str, Any]) -> dict[str, Any]:
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
    power = energy / span if energy is not None and span > 0 else (signals.get("gpu_power_w") or {}).get("mean")
    return {
        "rank": payload["rank"],
        "host": payload["host"],
        "device": payload.get("device", ""),
        "samples": len(times),
        "span_s": times[-1] - times[0] if len(times) >= 2 else 0.0,
        "signals": signals,
        "util_pct": sum(util) / len(util) if util else None,
        "idle_fraction": sum(1 for v in util if v < IDLE_UTIL_PCT) / len(util) if util else None,
        "throttle_fraction": throttle,
        "energy_j": energy,
        "avg_power_w": power,
        "sampler_cpu_s": payload.get("sampler_cpu_s"),
        "missing": dict(payload.get("missing") or {}),
    }


def host_summary(payload: dict[str, Any], ranks: int) -> dict[str, Any]:
    """A host's shared signals (CPU, network, InfiniBand, RAPL), from its lowest rank's series;
    interfaces that carried nothing in the window are left out."""
    columns = payload["columns"]
    times = columns.get("t_s", [])
    signals = {}
    for name, values in columns.items():
        info = signal_info(name)
        if info is None or info.scope != "host" or not (summary := signal_summary(name, times, values)):
            continue
        if info.kind == "counter" and not summary.get("total") and name != "cpu_energy_j":
            continue
        signals[name] = summary
    energy = counter_total(columns.get("cpu_energy_j", []))
    span = counter_span(times, columns.get("cpu_energy_j", []))
    return {
        "host": payload["host"],
        "ranks": ranks,
        "signals": signals,
        "cpu_energy_j": energy,
        "cpu_power_w": energy / span if energy is not None and span > 0 else None,
    }


def pooled_signals(payloads: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
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
        if (summary := describe(column, signal_info(name).rate_unit)) and (
            totals.get(name) or name.endswith("energy_j")
        ):
            out[name] = {**summary, "total": totals.get(name)}
    return dict(sorted(out.items()))


def summarize(
    payloads: Sequence[dict[str, Any]],
    *,
    tokens: int,
    window_s: float,
    device_type: str,
    sidecar: str | None = None,
) -> dict[str, Any]:
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
    for payload in payloads:
        for source, reason in (payload.get("missing") or {}).items():
            missing.setdefault(source, f"rank {payload['rank']}: {reason}")
    utils = [v for p in payloads for v in p["columns"].get("util_pct", []) if v is not None]
    throttle, reasons = throttle_fractions([v for p in payloads for v in p["columns"].get("gpu_throttle_reasons", [])])
    energy_source, watts, reason = _power(ranks, hosts, device_type)
    energy_j = watts * window_s if watts is not None else None
    energy_per_token = energy_j / tokens if energy_j is not None and tokens > 0 else None
    if energy_per_token is None:
        missing["energy_per_token_j"] = reason or "no timed tokens"
    device_power = [r["avg_power_w"] for r in ranks]
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
    return {
        "interval_ms": payloads[0].get("interval_ms") if payloads else None,
        "window_s": window_s,
        "ranks": len(payloads),
        "samples": sum(r["samples"] for r in ranks),
        "sampler_cpu_s": _sum_known([r["sampler_cpu_s"] for r in ranks]),
        "sidecar": sidecar,
        "util_pct": sum(utils) / len(utils) if utils else None,
        "idle_devices": sum(1 for r in ranks if (r["idle_fraction"] or 0.0) > 0.5),
        "throttle_fraction": throttle,
        "throttle_reasons": reasons,
        "energy_source": energy_source,
        "energy_j": energy_j,
        "energy_per_token_j": energy_per_token,
        "avg_power_w_per_device": avg_power,
        "signals": pooled_signals(payloads),
        "per_rank": ranks,
        "per_host": hosts,
        "missing": missing,
    }


def _power(ranks: list[dict], hosts: list[dict], device_type: str) -> tuple[str | None, float | None, str | None]:
    """(energy source, total watts from the energy counters, reason when unmeasured).

    CUDA: every GPU's board energy counter (NVML) over its span, summed; CPU: every host's RAPL
    package energy over its span, summed. Sampled power readings never stand in for a counter."""
    if device_type == "cuda":
        lacking = [r["rank"] for r in ranks if r["energy_j"] is None or not r["avg_power_w"]]
        if lacking or not ranks:
            return None, None, f"GPU energy counter unavailable on rank(s) {_ranks(lacking)}"
        return "gpu", sum(r["avg_power_w"] for r in ranks), None
    lacking = [h["host"] for h in hosts if h["cpu_power_w"] is None]
    if lacking or not hosts:
        return None, None, f"CPU: no RAPL package energy on {', '.join(lacking[:3])} (see missing.cpu_energy_j)"
    return "cpu-package", sum(h["cpu_power_w"] for h in hosts), None


def _sum_known(values: list[float | None]) -> float | None:
    return sum(values) if values and all(v is not None for v in values) else None


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
