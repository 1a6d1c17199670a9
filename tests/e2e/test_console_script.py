"""The console script's own ending (bench/cli/main.py `entry`), in a fresh interpreter as users run it."""

from __future__ import annotations

import subprocess
import sys

from bench.cli.main import BROKEN_PIPE_EXIT


def test_a_reader_that_closes_the_pipe_ends_the_plan_quietly():
    # `fsdp-bench plan ... --json | head -c 64`: the reader takes 64 bytes of a 138 kB text and goes;
    # more than a pipe holds (64 kB) is left to write, so a write meets the closed pipe.
    grid = ["model=debug", "nodes=1,2,4,8", "train.micro_batch=1,2,4,8", "train.grad_accum=1,2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "plan", *grid, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    head = proc.stdout.read(64)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == BROKEN_PIPE_EXIT, stderr
    assert head.startswith(b'[\n  {\n    "point_id": "')
    assert stderr == ""


def test_the_console_script_exits_with_the_commands_code():
    ok = subprocess.run([sys.executable, "-m", "bench", "plan", "model=debug"], capture_output=True, text=True)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert "debug" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "bench", "plan", "model=nope"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: model: unknown model 'nope'; allowed: ")
