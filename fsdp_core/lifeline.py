"""A launch lives only as long as the fsdp-bench that started it (torch-free, standard library only).

The process tree of a local launch is fsdp-bench -> torchrun agents -> ranks, and torchrun starts
every rank in a session of its own, so no process group reaches from the parent to the ranks. Two
mechanisms keep that tree from outliving its root, and a third keeps anything that survives from
writing:

- **Parent-death signals** (Linux `prctl(PR_SET_PDEATHSIG)`): bench starts each agent with
  `dies_with_this_process(SIGTERM)` as its pre-exec hook, so the agent gets SIGTERM when fsdp-bench
  dies, however it dies (SIGKILL included), and torchrun's own handler then stops its ranks. Each
  rank calls `bind_to_agent()` first thing and gets SIGKILL when its agent dies, so an agent killed
  outright (which cannot stop its ranks) still takes them along. The kernel sends the signal when
  the *thread* that forked the child ends: bench and torchrun both start children from their main
  thread, which lives as long as the process.
- **Late binding is checked**: a child whose parent died before the signal was set (the child was
  still starting) sees that it was re-parented and exits at once.
- **Ownership**: the launch file names the token of the sweep lock that launched it
  (protocol.LaunchFile.owner). Before every mark, record or error file, a rank checks that the
  sweep folder's lock still names that token (a rerun writes its own), that its holder is alive
  (on this host: its pid; anywhere: it touches the lock every OWNER_HEARTBEAT_S, and one silent
  for OWNER_SILENT_S is gone). An abandoned launch stops without writing (`LaunchAbandoned`), so
  nothing it measured beside a rerun, or after its parent died, can count.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.schema.protocol import OWNER_SILENT_S

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# torchrun sets this in every rank's environment: how a rank knows an agent is its parent.
TORCHRUN_ENV = "TORCHELASTIC_RUN_ID"
_AGENT_MARKERS = ("torch.distributed.run", "torchrun")


def _prctl() -> Callable | None:
    """libc's prctl, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def set_parent_death_signal(sig: int) -> bool:
    """Have the kernel send `sig` to this process when its parent (thread) ends; False if unsupported."""
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def dies_with_this_process(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `subprocess.Popen(preexec_fn=...)` hook: the child gets `sig` when this process ends.

    Call it, and Popen, from the main thread (the death signal follows the forking thread). Runs
    in the forked child before exec, so it only makes the system call (resolved here, in the
    parent) and compares pids: if this process died before the call, the child exits at once.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return hook


def bind_to_agent(sig: int = signal.SIGKILL) -> None:
    """In a rank started by torchrun: die with the agent; exit now if the agent died already.

    SIGKILL: the agent is gone, so nothing is left to clean up for, and a rank stuck in a
    collective must stop too. Ranks started otherwise (Ray, tests) are left alone.
    """
    if TORCHRUN_ENV not in os.environ or not set_parent_death_signal(sig):
        return
    if not _is_agent(os.getppid()):  # re-parented while starting: the agent is gone
        os._exit(1)


def _is_agent(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return True  # cannot tell: keep running (the death signal still holds)
    return any(marker in cmdline for marker in _AGENT_MARKERS)


class LaunchAbandoned(RuntimeError):
    """The fsdp-bench that owned this launch is gone, or a rerun owns the sweep folder now."""


# The launch this rank process runs: (owner token, the sweep folder's lock file). One launch per
# rank process; None when the launch names no owner (ranks run without a sweep lock, as in tests).
_owned_by: tuple[str, Path] | None = None


def hold(owner: str | None, lock_file: Path | None) -> None:
    """Bind this process's writes to the launch's owner (see `check_owned`)."""
    global _owned_by
    _owned_by = (owner, Path(lock_file)) if owner and lock_file else None


def check_owned() -> None:
    """Raise LaunchAbandoned (with the reason) unless this process's launch is still owned."""
    if _owned_by is not None and (reason := abandoned(*_owned_by)):
        raise LaunchAbandoned(reason)


def still_owned() -> bool:
    """Whether this process may write into the results folder (True when no owner was bound)."""
    try:
        check_owned()
    except LaunchAbandoned as exc:
        print(f"fsdp-bench rank: not writing: {exc}", file=sys.stderr, flush=True)
        return False
    return True


def abandoned(owner: str, lock_file: Path) -> str | None:
    """Why a launch owned by `owner` is abandoned, or None while its owner holds the sweep lock.

    Only positive evidence counts: an empty or unreadable lock file (a holder writing it, a results
    folder mirrored from object storage) leaves the launch owned.
    """
    try:
        with open(lock_file, "rb") as handle:  # open, then fstat: fresh attributes on NFS too
            silent_s = time.time() - os.fstat(handle.fileno()).st_mtime
            holder = json.loads(handle.read() or b"{}")
    except (OSError, ValueError):
        return None
    if not holder:
        return None
    who = f"pid {holder.get('pid')} on {holder.get('host')}"
    if owner not in (holder.get("token"), *holder.get("adopted", [])):
        return f"another fsdp-bench ({who}) owns the sweep folder now ({lock_file})"
    if holder.get("host") == socket.gethostname() and not pid_alive(holder.get("pid")):
        return f"the fsdp-bench that launched it ({who}) is gone"
    if silent_s > OWNER_SILENT_S:
        return f"the fsdp-bench that launched it ({who}) has not touched {lock_file} for {silent_s:.0f} s"
    return None


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return True  # nothing to check
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is dead: only its parent has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True
