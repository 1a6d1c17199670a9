"""Telemetry: what this rank's device and host did during the timed steps.

A daemon thread samples every `telemetry.interval_ms` from the first timed step to the last
(fsdp_core/train.py starts it when the timed window opens and stops it after the closing device
sync). It never touches torch or the CUDA stream, so it never syncs the device; its readers are
NVML (nvidia-ml-py), psutil, /sys/class/infiniband and /sys/class/powercap (RAPL). Every reader
that cannot start, or fails mid-run, is dropped with its reason and the others go on: a failing
sampler never fails the point, and the record says what is missing and why.

After the loop every rank's series goes to rank 0 (`gather_telemetry`, outside the timed window),
which writes them to a sidecar next to result.json (Parquet where pyarrow imports, else CSV) and
summarises them for the record. Everything but the gather is torch-free:

    telemetry.py          the sampler thread, the gather to rank 0, the sidecar
    telemetry_readers.py  what is read: NVML, psutil, InfiniBand/EFA, RAPL (with NVML's parsing)
    telemetry_summary.py  what each signal is, and the record's summaries (pure functions)

Series columns: `t_s` (seconds since the sampler started), then one column per signal (SIGNALS;
`net_<iface>_{tx,rx}_bytes` and `ib_<device>_<port>_{tx,rx}_bytes` per interface). Counters are
stored as their raw cumulative readings; summaries take differences (totals) and rates.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.schema.files import atomic_path
from bench.schema.protocol import TELEMETRY_CSV, TELEMETRY_PARQUET
from bench.schema.telemetry import Telemetry
from fsdp_core.lifeline import LaunchAbandoned, check_owned
from fsdp_core.telemetry_readers import Readers, build_readers, reason_of
from fsdp_core.telemetry_summary import summarize


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
            self.missing["sampler"] = f"sampling stopped after {time.perf_counter() - self._t0:.1f} s: {reason_of(exc)}"
        finally:
            self.thread_cpu_s = time.thread_time()

    def _sample(self) -> None:
        row: dict[str, float | None] = {"t_s": time.perf_counter() - self._t0}
        for reader in list(self.readers):
            try:
                row.update(reader.read())
            except Exception as exc:  # noqa: BLE001 - a vanished counter or a lost GPU: keep the rest
                self.readers.remove(reader)
                self.missing[reader.source] = (
                    f"failed after {row['t_s']:.1f} s (earlier samples kept): {reason_of(exc)}"
                )
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
        readers = Readers(missing={"sampler": f"could not set up the readers: {reason_of(exc)}"})
    return Sampler(interval_ms, readers, meta)


# --- gathering and the sidecar ----------------------------------------------------------------


def gather_telemetry(
    series: dict[str, Any] | None, point_dir: Path, *, tokens: int, window_s: float, device_type: str
) -> Telemetry | None:
    """Every rank's series to rank 0 (a collective: every rank calls it), which writes the sidecar
    and returns the record's telemetry section; other ranks get None. Outside the timed window.

    A launch that is no longer owned writes no sidecar: LaunchAbandoned goes up, as for the record."""
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
    except LaunchAbandoned:
        raise
    except Exception as exc:  # noqa: BLE001 - the summary still goes into the record
        sidecar, missing = None, {"sidecar": f"could not write the series: {reason_of(exc)}"}
    summary = summarize(payloads, tokens=tokens, window_s=window_s, device_type=device_type, sidecar=sidecar)
    summary.missing.update(missing)
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
    """Write the series next to result.json (Parquet where pyarrow imports, else CSV); its file name.
    Only while this rank's launch is owned (fsdp_core/lifeline.py): never beside a rerun's record."""
    check_owned()
    table = sidecar_table(payloads)
    if parquet is None:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            parquet = False
        else:
            parquet = True
    name = TELEMETRY_PARQUET if parquet else TELEMETRY_CSV
    with atomic_path(point_dir / name) as tmp:
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
    return name
