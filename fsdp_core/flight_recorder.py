"""Each rank's Flight Recorder dump of a point that hangs (read by bench/analysis/hang.py).

torch's Flight Recorder keeps the last TORCH_FR_BUFFER_SIZE collectives of every process group (on
gloo too, without timings). A rank blocked in a gloo collective never runs a Python signal handler,
so a daemon thread waits on `signal.set_wakeup_fd`: on SIGTERM (every launcher's first stop) it
writes `<point_dir>/flight_recorder/rank<R>.json`, then ends the process itself with `os._exit`.
It also writes one on its own at the point's deadline less a lead, for a launcher that collects
before it signals (Kubeflow pulls the results before it deletes the pods). A point that finishes
deletes its dump: an ok point leaves none. No stack traces: they take seconds per rank, a good part
of the launchers' grace between SIGTERM and SIGKILL.

Beside torch's JSON the dump holds what the dump cannot say on gloo: the groups this rank knows
(torch leaves `pg_config` empty), when the point started (the buffer also holds earlier points'
collectives of the same launch), and what the harness was doing (`doing`), so the verdict can name
the step timer's barrier and FSDP's reduce-scatter, which gloo records as an all_reduce.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

from bench.schema.protocol import FLIGHT_RECORDER_DIR, FR_DEADLINE_LEAD_S, FR_LEAD_ENV, flight_recorder_file
from fsdp_core.lifeline import still_owned

_lock = threading.RLock()  # re-entered by a signal handler that runs while the main thread holds it
_state: dict = {"point_dir": None, "deadline": None, "started_ns": 0, "point_id": "", "doing": "", "dumped": False}
_wake = threading.Event()
_started = False


def doing(what: str) -> None:
    """Say what the harness does now ("forward of step 3"): the dump names it beside its collectives."""
    _state["doing"] = what


def doing_now() -> str:
    """What the harness was last doing (an out-of-memory's reason names it too)."""
    return _state["doing"]


def _dump_json() -> str | None:
    """torch's Flight Recorder JSON, or None where this torch has no such dump (looked up tolerantly)."""
    try:
        dump = torch._C._distributed_c10d._dump_fr_trace_json
    except AttributeError:
        return None
    return dump(includeCollectives=True, onlyActive=False)


def _groups() -> dict[str, dict]:
    """Every process group this rank knows: name -> description and ranks (gloo's pg_config is empty)."""
    try:
        names = dict(dist.distributed_c10d._world.pg_names)
    except AttributeError:
        names = {}
    groups = {}
    for group, name in names.items():
        with contextlib.suppress(Exception):
            ranks = dist.get_process_group_ranks(group)
            groups[str(name)] = {"desc": str(getattr(group, "group_desc", "")), "ranks": list(ranks)}
    return groups


def write_dump(reason: str) -> Path | None:
    """Write this rank's dump of the running point; None when no point runs or it may not write."""
    point_dir = _state["point_dir"]
    if point_dir is None or not still_owned():
        return None
    trace = _dump_json()
    body = {
        "rank": dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0)),
        "world_size": dist.get_world_size() if dist.is_initialized() else 1,
        "point_id": _state["point_id"],
        "point_started_ns": _state["started_ns"],
        "reason": reason,
        "doing": _state["doing"],
        "groups": _groups() if dist.is_initialized() else {},
        "trace": None if trace is None else json.loads(trace),
        "unavailable": None if trace is not None else "this torch has no Flight Recorder JSON dump",
    }
    path = flight_recorder_file(point_dir, body["rank"])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(body))
    partial.replace(path)
    _state["dumped"] = True
    return path


def _dump_and_exit(signum: int) -> None:
    with _lock:  # the main thread's handler and the waiting thread: one dumps, then the process ends
        with contextlib.suppress(Exception):
            write_dump(signal.Signals(signum).name)
        os._exit(128 + signum)


def _watch(read_fd: int) -> None:
    """The daemon thread: dump and exit on a signal; dump once at the point's deadline."""
    while True:
        deadline = _state["deadline"]
        wait = None if deadline is None else max(0.0, deadline - time.time())
        ready, _, _ = select.select([read_fd], [], [], 1.0 if wait is None else min(wait, 1.0))
        if ready:
            data = os.read(read_fd, 64)
            if data:
                _dump_and_exit(data[0])
        elif deadline is not None and time.time() >= deadline and _state["deadline"] == deadline:
            _state["deadline"] = None
            with _lock, contextlib.suppress(Exception):
                write_dump("deadline")


def _on_signal(signum: int, frame) -> None:  # noqa: ARG001 - the signal module's handler signature
    _dump_and_exit(signum)


def install() -> bool:
    """Start the watching thread once per process; False where signals cannot be caught here (a
    rank that is not its process's main thread, as under Ray: it dumps at the deadline only)."""
    global _started
    if _started:
        return True
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    caught = threading.current_thread() is threading.main_thread()
    if caught:
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, _on_signal)
    threading.Thread(target=_watch, args=(read_fd,), name="fsdp-bench-flight-recorder", daemon=True).start()
    _started = True
    return caught


def lead_s() -> float:
    """How long before the point's deadline this rank dumps on its own (the launcher's FR_LEAD_ENV)."""
    try:
        return float(os.environ.get(FR_LEAD_ENV) or FR_DEADLINE_LEAD_S)
    except ValueError:
        return FR_DEADLINE_LEAD_S


def begin_point(point_dir: Path, point_id: str, timeout_s: float, entered: float) -> None:
    """The point that runs now: its dump's folder, and its deadline less the lead."""
    install()
    _state.update(
        point_dir=Path(point_dir),
        point_id=point_id,
        started_ns=int(entered * 1e9),
        deadline=entered + max(0.0, timeout_s - lead_s()),
        doing="setting up",
        dumped=False,
    )


def end_point(finished: bool) -> None:
    """No more dumps of this point; one it left at its deadline goes if the point finished after all."""
    with _lock:
        point_dir, _state["point_dir"], _state["deadline"] = _state["point_dir"], None, None
    if finished and point_dir is not None and dist.is_initialized():
        flight_recorder_file(point_dir, dist.get_rank()).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (Path(point_dir) / FLIGHT_RECORDER_DIR).rmdir()  # the last rank's removal empties it
