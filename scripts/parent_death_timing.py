"""How long the processes of a launch outlive a killed fsdp-bench (docs/results/reliability.md).

    python scripts/parent_death_timing.py [--trials 5] [--launcher local|ray] [--signal KILL|HUP|TERM]

Each trial starts `fsdp-bench run model=debug nodes=2` with a long point in a fresh results folder,
waits until the point has started, sends the signal to fsdp-bench, and times until no process of the
launch is left (torchrun agents and ranks, or the Ray driver, its local cluster and its workers),
polled every 0.1 s. Prints every trial and the median; exits 1 if any process outlived 60 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLL_S = 0.1
GIVE_UP_S = 60.0


def launch_processes(results: Path, sessions: set[int]) -> list[int]:
    """Pids of the launch's processes still alive (zombies excluded): those naming `results` (agents,
    ranks, the Ray driver) and every member of `sessions` (a Ray driver's session: its local cluster)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" or int(proc.name) == os.getpid():
            continue
        if (str(results) in cmdline and "bench run" not in cmdline) or int(fields[3]) in sessions:
            pids.append(int(proc.name))
    return pids


def trial(launcher: str, sig: signal.Signals) -> float:
    with tempfile.TemporaryDirectory(prefix="parent-death-") as tmp:
        results = Path(tmp)
        cmd = [sys.executable, "-m", "bench", "run", "model=debug", "nodes=2", "train.seq_len=32", "train.steps=2000",
               "train.warmup_steps=1", f"launcher={launcher}", f"results_dir={results}"]  # fmt: skip
        env = {**os.environ, "FSDP_BENCH_ALLOW_CONCURRENT": "1"}
        parent = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not list(results.glob("adhoc/*/started")):
            if parent.poll() is not None:
                raise SystemExit(f"fsdp-bench ended before its point started (exit {parent.returncode})")
            time.sleep(POLL_S)
        # The Ray driver leads a session of its own: its local cluster and workers are members.
        sessions = {pid for pid in launch_processes(results, set()) if launcher == "ray"}
        parent.send_signal(sig)
        signalled = time.monotonic()
        while launch_processes(results, sessions) and time.monotonic() - signalled < GIVE_UP_S:
            time.sleep(POLL_S)
        elapsed = time.monotonic() - signalled
        left = launch_processes(results, sessions)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        parent.wait()
        return elapsed if not left else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--launcher", choices=("local", "ray"), default="local")
    parser.add_argument("--signal", choices=("KILL", "HUP", "TERM"), default="KILL")
    args = parser.parse_args()
    sig = signal.Signals[f"SIG{args.signal}"]
    times = []
    for i in range(args.trials):
        times.append(trial(args.launcher, sig))
        print(f"trial {i + 1}: every process gone {times[-1]:.1f} s after SIG{args.signal}", flush=True)
    print(f"median {statistics.median(times):.1f} s, max {max(times):.1f} s over {len(times)} trials "
          f"(launcher={args.launcher}, SIG{args.signal}, load average {os.getloadavg()[0]:.1f})")  # fmt: skip
    return 0 if max(times) < GIVE_UP_S else 1


if __name__ == "__main__":
    sys.exit(main())
