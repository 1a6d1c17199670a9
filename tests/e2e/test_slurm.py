"""launcher=slurm for real: a 2-node point through a one-host Slurm cluster (two slurmd "nodes").

The module fixture installs the Debian packages where it can (root + apt, scripts/deps/slurm.sh),
starts the cluster with scripts/slurm_local.sh and stops it afterwards if it started it; where
it cannot, the tests skip with the printed reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from bench_cli import CliRun, in_process, run_separately, start

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "scripts" / "slurm_local.sh"
NODES = ["fsdp-slurm1", "fsdp-slurm2"]
# Few steps: two ranks share this host's cores; the point itself takes a few seconds.
QUICK = ["model=debug", "nodes=2", "train.steps=4", "train.warmup_steps=1", "launcher=slurm"]
# One node where the job's life, not its world, is tested (a timeout, an orphan): half the ranks.
ONE_NODE = ["nodes=1" if arg == "nodes=2" else arg for arg in QUICK]
LOCAL_CLUSTER = ["launcher.ranks_per_host=2", "launcher.poll_s=0.5", "launcher.startup_grace_s=120"]


def fsdp_bench(args: list[str], env: dict, timeout: float = 150, command: str = "run") -> CliRun:
    return run_separately(command, *args, env=env, timeout=timeout)


def skip(reason: str):
    print(f"slurm tests skipped: {reason}")
    pytest.skip(reason)


def ensure_packages() -> None:
    """Install slurmctld/slurmd/munge where this machine allows it (about 15 s), else skip."""
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        skip("Slurm is not installed and installing it needs root and apt-get")
    out = subprocess.run(["bash", str(REPO / "scripts/deps/slurm.sh")], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        skip(f"installing Slurm failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}")


@pytest.fixture(scope="module")
def slurm_env():
    """The environment (SLURM_CONF) of a running local cluster."""
    if os.geteuid() != 0:
        skip("the local Slurm cluster runs its daemons as root")
    ensure_packages()
    started_here = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True).returncode != 0
    if started_here:
        out = subprocess.run(["bash", str(CLUSTER), "start"], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            skip(f"the local Slurm cluster did not start: {(out.stderr or out.stdout).strip()[-400:]}")
    status = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, text=True)
    conf = next(line.split("=", 1)[1] for line in status.stdout.splitlines() if line.startswith("SLURM_CONF="))
    yield {**os.environ, "SLURM_CONF": conf}
    if started_here:
        subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, timeout=60)


def our_jobs(env: dict) -> list[str]:
    out = subprocess.run(["squeue", "--noheader", "--format", "%i %j"], capture_output=True, text=True, env=env)
    return [line for line in out.stdout.splitlines() if "fsdp-bench-" in line]


@pytest.mark.slurm
@pytest.mark.timeout(240)
@pytest.mark.ranks
def test_two_node_point_through_local_slurm(slurm_env, tmp_path):
    proc = fsdp_bench([*QUICK, *LOCAL_CLUSTER, f"results_dir={tmp_path}"], slurm_env)
    assert proc.rc == 0, proc.stdout + proc.stderr
    (record_path,) = tmp_path.glob("adhoc/*/result.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "ok"
    assert record["spec"]["launcher"] == "slurm"
    assert record["spec"]["world_size"] == 2
    assert sorted(record["env"]["hostnames"]) == NODES  # one rank on each slurmd "node"
    threads = max(1, (os.cpu_count() or 1) // 2)  # two ranks share this host
    assert record["env"]["env_vars"]["OMP_NUM_THREADS"] == str(threads)
    assert record["env"]["env_vars"]["FSDP_BENCH_RANKS_PER_HOST"] == "2"
    (launch_dir,) = tmp_path.glob("adhoc/_launches/*")
    assert (launch_dir / "exit_code").read_text().strip() == "0"
    job_id = (launch_dir / "job_id").read_text().strip()
    assert (launch_dir / f"slurm-{job_id}.log").exists()
    assert our_jobs(slurm_env) == []


@pytest.mark.slurm
@pytest.mark.timeout(240)
@pytest.mark.ranks
def test_a_preflight_through_local_slurm_names_each_node(slurm_env, tmp_path):
    from bench.analysis.preflight import read_preflight

    # Rank 1 three times as slow as it measures (slow_fraction=2; the default half failed once in a
    # clean clone's CI, the other tests' ranks slowing rank 0's matmul as much): a straggler under any load.
    args = [*QUICK, *LOCAL_CLUSTER, "train.seq_len=32", "preflight.max_bytes=65536", "preflight.iters=3",
            "debug.slow_rank=1", "debug.slow_fraction=2", f"results_dir={tmp_path}"]  # fmt: skip
    proc = fsdp_bench(args, slurm_env, command="preflight")
    assert proc.rc == 0, proc.stdout + proc.stderr
    record = read_preflight(tmp_path / "adhoc" / "_preflight" / "2x1")
    assert record.status == "ok" and record.spec.launcher == "slurm"
    # One rank on each slurmd "node"; which node holds rank 0 is the rendezvous' choice.
    assert [r.rank for r in record.ranks] == [0, 1] and sorted(r.host for r in record.ranks) == sorted(NODES)
    assert {s.op for s in record.collectives if s.group == "world"} == {"all_gather", "reduce_scatter", "all_reduce"}
    slow_host = record.ranks[1].host
    assert [(s.measure, s.rank, s.host) for s in record.stragglers] == [("matmul", 1, slow_host)]
    assert f"straggler: rank 1 (host {slow_host}, local rank 0)" in proc.stdout
    assert our_jobs(slurm_env) == []


@pytest.mark.slurm
@pytest.mark.timeout(240)
@pytest.mark.ranks
def test_hanging_point_is_cancelled_and_recorded_as_timeout(slurm_env, tmp_path):
    args = [
        *ONE_NODE,
        *LOCAL_CLUSTER,
        "debug.hang=true",
        "debug.fail_rank=0",
        "debug.fail_step=1",
        "sweep.point_timeout_s=5",
        f"results_dir={tmp_path}",
    ]
    proc = fsdp_bench(args, slurm_env)
    assert proc.rc == 1, proc.stdout + proc.stderr
    (record_path,) = tmp_path.glob("adhoc/*/result.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "timeout"
    assert "sweep.point_timeout_s=5" in record["error"]
    # One rank: no collective was pending; its dump, written on Slurm's SIGTERM, names its last one.
    assert record["hang"]["collective"] is None and record["hang"]["dumped_ranks"] == [0]
    assert record["error"].startswith("hung outside any collective (none was pending): rank 0's last collective: ")
    assert "it was in debug.hang of step 1" in record["error"]
    assert our_jobs(slurm_env) == []  # scancel'led, not left running


def test_slurm_without_sbatch_is_invalid_input(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty PATH: no Slurm tools
    proc = in_process("run", "model=debug", "launcher=slurm", f"results_dir={tmp_path}", env=env)  # refused here
    assert proc.rc == 2
    assert proc.stderr.startswith("error: launcher: slurm needs sbatch on PATH (")
    assert not list(tmp_path.glob("adhoc/*/result.json"))


def test_unknown_slurm_option_names_field_and_allowed_values(tmp_path):
    proc = in_process("run", "model=debug", "launcher=slurm", "+launcher.partiton=gpu")  # refused: nothing runs
    assert proc.rc == 2
    assert (
        "launcher.partiton: unknown field for launcher=slurm (did you mean partition?); allowed: partition, account"
        in proc.stderr
    )


def orphan_job(args: list[str], env: dict, results: Path) -> str:
    """Start a long point, SIGKILL its fsdp-bench once it runs: the Slurm job runs on. Its job id."""
    long = [a for a in args if not a.startswith("train.steps=")] + ["train.steps=2000"]
    proc = start("run", *long, f"results_dir={results}", env=env)
    since, deadline = time.time(), time.monotonic() + 150
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.stat().st_mtime > since for p in results.glob("adhoc/*/started")):
            break
        time.sleep(0.1)
    proc.kill()  # this process only: its Slurm job runs on
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    (job_file,) = [p for p in results.glob("adhoc/_launches/*/job.json")]
    job_id = json.loads(job_file.read_text())["job_id"]
    assert any(line.startswith(f"{job_id} ") for line in our_jobs(env)), "the job ended with its parent"
    return job_id


@pytest.mark.slurm
@pytest.mark.timeout(300)
@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_a_job_left_by_a_killed_parent_is_cancelled_by_fsdp_bench_cancel_and_by_the_next_run(slurm_env, tmp_path):
    args = [*ONE_NODE, *LOCAL_CLUSTER]
    job_id = orphan_job(args, slurm_env, tmp_path)
    launch_dir = next(tmp_path.glob("adhoc/_launches/*"))
    cancel = in_process("cancel", tmp_path, env=slurm_env)  # nobody holds the folder: the job is what is left
    assert cancel.rc == 0, cancel.stdout + cancel.stderr
    assert cancel.stdout == f"cancelled slurm job {job_id} ({launch_dir})\n"
    assert our_jobs(slurm_env) == [] and not (launch_dir / "job.json").exists()

    job_id = orphan_job(args, slurm_env, tmp_path)
    proc = fsdp_bench([*args, f"results_dir={tmp_path}"], slurm_env)  # the next run of the sweep: 4 steps
    assert proc.rc == 0, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"cancelled slurm job {job_id} (")
    assert "left running by an fsdp-bench that is gone (pid " in proc.stderr
    assert our_jobs(slurm_env) == []
    records = [json.loads(p.read_text()) for p in tmp_path.glob("adhoc/*/result.json")]
    assert [(r["status"], r["spec"]["train"]["steps"]) for r in records] == [("ok", 4)]  # nothing of the orphans
