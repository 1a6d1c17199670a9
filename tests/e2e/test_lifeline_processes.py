"""Processes that die with their parent (fsdp_core/lifeline.py): real processes and real signals
(plain Python, no torch: fast), so not in tests/unit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsdp_core.lifeline import TORCHRUN_ENV

REPO = Path(__file__).resolve().parents[2]


# A parent that starts a sleeping child (with or without the hook), prints its pid, then waits.
PARENT = """
import subprocess, sys, time
from fsdp_core.lifeline import dies_with_this_process
hook = dies_with_this_process() if sys.argv[1] == "hook" else None
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=hook, start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_within(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_child_started_with_the_hook_dies_with_its_parent_even_by_sigkill():
    children = {}
    for mode in ("hook", "plain"):
        parent = subprocess.Popen([sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, text=True, cwd=REPO)
        children[mode] = int(parent.stdout.readline())
        parent.kill()  # SIGKILL: no handler of the parent runs
        parent.wait()
    try:
        assert gone_within(children["hook"])
        assert alive(children["plain"])  # what every agent did before: it outlived fsdp-bench
    finally:
        os.kill(children["plain"], signal.SIGKILL)


# A stand-in torchrun agent (its command line names torch.distributed.run) with one "rank" under it.
AGENT = """
import os, subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={**os.environ, sys.argv[2]: "x"})
print(rank.pid, flush=True)
time.sleep(60)
"""
RANK = "import time; from fsdp_core.lifeline import bind_to_agent; bind_to_agent(); print('bound', flush=True); time.sleep(60)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_rank_dies_with_its_agent_and_one_whose_agent_is_gone_stops_at_once():
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, RANK, TORCHRUN_ENV, "torch.distributed.run"],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    rank = int(agent.stdout.readline())
    assert agent.stdout.readline() == "bound\n"
    agent.kill()  # SIGKILL: the agent cannot stop its ranks itself
    agent.wait()
    assert gone_within(rank)
    # Started by torchrun (its environment says so) but re-parented before binding: exits 1 at once.
    orphan = subprocess.run(
        [sys.executable, "-c", RANK], env={**os.environ, TORCHRUN_ENV: "x"}, cwd=REPO, timeout=30, capture_output=True
    )
    assert orphan.returncode == 1 and orphan.stdout == b""  # never got past binding
