"""launcher=kubeflow end to end without a cluster: rendering, bad input, and the apply flow
driven through a fake kubectl (a script that plays the training operator's part).

Rendering (apply=false) writes the manifests into the launch's work dir and runs nothing. The
apply flow is checked for what the launcher itself does: kubectl calls, waiting on conditions,
the point deadline, deleting the job, and collecting records through a results URL.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bench_cli import in_process

from bench.analysis.records import read_record
from bench.config.compose import load_point
from bench.config.problems import ConfigError
from bench.config.version import harness_version
from bench.run.execute import collect_launch, prepare_launch
from bench.run.launch import get_launcher
from bench.run.launch.base import note_job
from bench.run.launch.k8s_manifest import crd_schema, validate_pytorchjob
from bench.run.launch.kubeflow import RENDERED
from bench.run.launch.results_sync import filesystem, pull_points, push_tree
from bench.run.ownership.jobs import settle_left_jobs
from bench.schema.protocol import JOB_FILE

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "tests" / "fixtures" / "kubeflow" / "kubeflow.org_pytorchjobs.yaml"
FLIGHT_RECORDER_FIXTURES = REPO / "tests" / "fixtures" / "flight_recorder"  # real dumps (tests/unit/test_hang.py)

# A stand-in for kubectl: logs every call, answers from scenario.json. On `apply` it plays the
# pods: copies the prepared point files (pods/) to the results URL's directory.
FAKE_KUBECTL = """#!{python}
import json, os, shutil, sys
state = os.environ["FAKE_KUBE_DIR"]
args = sys.argv[1:]
with open(os.path.join(state, "calls.log"), "a") as log:
    log.write(" ".join(args) + "\\n")
scenario = json.load(open(os.path.join(state, "scenario.json")))
if args[:2] == ["config", "current-context"]:
    sys.exit(0 if scenario.get("context") else (print("error: current-context is not set", file=sys.stderr) or 1))
if "apply" in args and scenario.get("pods") and scenario.get("remote"):
    shutil.copytree(scenario["pods"], scenario["remote"], dirs_exist_ok=True)
if "delete" in args and "pytorchjob" in args:
    json.dump({{**scenario, "deleted": True}}, open(os.path.join(state, "scenario.json"), "w"))
if "get" in args and scenario.get("deleted"):
    sys.exit(0)  # --ignore-not-found: nothing
if "get" in args:
    phase = scenario["phase"]
    condition = {{"type": phase, "status": "True", "reason": phase + "Reason", "message": scenario.get("message", "")}}
    print(json.dumps({{"status": {{"conditions": [{{"type": "Created", "status": "True"}}, condition]}}}}))
if "logs" in args:
    print("[pod/fake-worker-0/pytorch] started")
"""


def fake_kubectl(tmp_path: Path, monkeypatch, **scenario) -> Path:
    state = tmp_path / "kube"
    state.mkdir()
    (state / "scenario.json").write_text(json.dumps({"context": True, **scenario}))
    tool = state / "kubectl"
    tool.write_text(FAKE_KUBECTL.format(python=sys.executable))
    tool.chmod(0o755)
    monkeypatch.setenv("FAKE_KUBE_DIR", str(state))
    return tool


def calls(tool: Path) -> list[str]:
    return (tool.parent / "calls.log").read_text().splitlines()


def debug_spec(*overrides: str):
    return load_point(["model=debug", "nodes=2", "launcher=kubeflow", *overrides]).spec


def test_apply_false_renders_manifests_and_runs_nothing(tmp_path):
    request = prepare_launch([debug_spec()], tmp_path)
    launcher = get_launcher("kubeflow", {"name": "kubeflow"})
    launcher.check_available(request.points[0])  # rendering needs neither kubectl nor a context
    outcome = launcher.launch(request)
    manifest = request.work_dir / "pytorchjob.yaml"
    assert (outcome.returncode, outcome.detail, outcome.log_files) == (0, RENDERED, [manifest])
    assert outcome.rendered is True  # run_group stores no record for it
    configmap, job = yaml.safe_load_all(manifest.read_text())
    assert (configmap["kind"], job["kind"]) == ("ConfigMap", "PyTorchJob")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert json.loads(configmap["data"]["launch.json"])["points"][0]["point_id"] == request.points[0].point_id
    assert not list(tmp_path.glob("*/*/result.json"))
    if CRD.exists():
        assert validate_pytorchjob(job, crd_schema(yaml.safe_load(CRD.read_text()))) == []


def test_a_preflight_launch_renders_with_its_folder_inside_the_pods(tmp_path):
    from bench.run.preflight import preflight_task
    from bench.schema.options import PreflightSettings

    spec = debug_spec()
    task = preflight_task(spec, PreflightSettings(), [spec.strategy], tmp_path)
    request = prepare_launch([], tmp_path, preflight=task)
    outcome = get_launcher("kubeflow", {"name": "kubeflow"}).launch(request)
    assert outcome.rendered is True
    configmap, job = yaml.safe_load_all((request.work_dir / "pytorchjob.yaml").read_text())
    launch = json.loads(configmap["data"]["launch.json"])
    assert launch["points"] == [] and launch["preflight"]["point_dir"] == "/results/adhoc/_preflight/2x1"
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2  # the preflight's world shape
    assert job["metadata"]["name"].startswith("fsdp-")


def test_apply_without_kubectl_is_invalid_input(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no kubectl anywhere
    proc = in_process(
        "run", "model=debug", "launcher=kubeflow", "launcher.apply=true", f"results_dir={tmp_path}", env=env
    )
    assert proc.rc == 2
    assert proc.stderr.startswith("error: launcher.apply: true needs kubectl on PATH ('kubectl' not found;")


def test_apply_without_context_is_invalid_input(tmp_path, monkeypatch):
    tool = fake_kubectl(tmp_path, monkeypatch, context=False, phase="Running")
    args = ["model=debug", "launcher=kubeflow", "launcher.apply=true", f"launcher.kubectl={tool}"]
    proc = in_process("run", *args, f"results_dir={tmp_path}")  # refused before anything launches
    assert proc.rc == 2
    assert proc.stderr.strip() == (
        "error: launcher.apply: true needs a kubectl context (error: current-context is not set); "
        "run `aws eks update-kubeconfig --name <cluster>` or set launcher.context"
    )
    assert not list(tmp_path.glob("adhoc/*/result.json"))


def test_apply_without_shared_results_is_invalid_input(tmp_path, monkeypatch):
    tool = fake_kubectl(tmp_path, monkeypatch, phase="Running")
    launcher = get_launcher("kubeflow", {"name": "kubeflow", "apply": True, "kubectl": str(tool)})
    with pytest.raises(ConfigError) as err:
        launcher.check_available(debug_spec())
    assert err.value.lines == [
        "launcher.results_pvc: apply=true needs a shared results location: results_pvc or results_url"
    ]


def applied(tmp_path, monkeypatch, spec, options: dict, **scenario):
    """Run one launch through the fake kubectl; (request, outcome, tool)."""
    request = prepare_launch([spec], tmp_path / "results")
    tool = fake_kubectl(tmp_path, monkeypatch, **scenario)
    opts = {"name": "kubeflow", "apply": True, "kubectl": str(tool), "poll_s": 0.05, **options}
    launcher = get_launcher("kubeflow", opts)
    launcher.check_available(spec)
    return request, launcher.launch(request), tool


def test_failed_job_is_recorded_with_the_operator_reason_and_deleted(tmp_path, monkeypatch):
    spec = debug_spec()
    started = dt.datetime.now(dt.timezone.utc)
    scenario = {"phase": "Failed", "message": "PyTorchJob fsdp is failed because 1 Worker replica(s) failed."}
    request, outcome, tool = applied(tmp_path, monkeypatch, spec, {"results_pvc": "fsx"}, **scenario)
    assert outcome.returncode == 1 and not outcome.timed_out
    (record,) = collect_launch(request, outcome, started)
    assert record.status == "failed"
    assert record.error.endswith("failed: FailedReason PyTorchJob fsdp is failed because 1 Worker replica(s) failed.")
    assert record.env.harness == harness_version()  # a parent-written failure names the harness too
    log = calls(tool)
    name = f"fsdp-{spec.point_id}-"
    assert log[0] == "config current-context"
    assert log[1].startswith("--namespace default apply -f ") and log[1].endswith("pytorchjob.yaml")
    assert any(c.startswith(f"--namespace default delete pytorchjob {name}") for c in log)
    assert any(c.startswith(f"--namespace default delete configmap {name}") for c in log)
    assert (request.work_dir / "pods.log").read_text() == "[pod/fake-worker-0/pytorch] started\n"
    assert not (request.work_dir / JOB_FILE).exists()  # seen to end: nothing left to find


def test_a_job_left_by_a_dead_parent_is_deleted_by_the_next_holder(tmp_path, monkeypatch):
    tool = fake_kubectl(tmp_path, monkeypatch, phase="Running")
    sweep = tmp_path / "results" / "adhoc"
    launch = sweep / "_launches" / "left"
    launch.mkdir(parents=True)
    options = {"name": "kubeflow", "apply": True, "kubectl": str(tool), "namespace": "bench"}
    note_job(launch, "kubeflow", "fsdp-abc-1", options)  # what KubeJob.run leaves when its process dies
    said = []
    settle_left_jobs(sweep, "cancel", {"pid": 7, "host": "login1"}, said.append)
    get = "--namespace bench get pytorchjob fsdp-abc-1 --ignore-not-found --output json"
    assert calls(tool) == [
        get,
        "--namespace bench delete pytorchjob fsdp-abc-1 --ignore-not-found --wait=false",
        "--namespace bench delete configmap fsdp-abc-1-launch --ignore-not-found --wait=false",
        get,
    ]
    assert said == [
        f"cancelled kubeflow job fsdp-abc-1 ({launch}), left running by an fsdp-bench that is gone "
        "(pid 7 on login1); sweep.orphans=wait waits instead"
    ]
    assert not (launch / JOB_FILE).exists()


def test_running_job_past_its_deadline_is_deleted_as_timeout(tmp_path, monkeypatch):
    spec = debug_spec("sweep.point_timeout_s=0.5")
    options = {"results_pvc": "fsx", "startup_grace_s": 0.2}
    request, outcome, tool = applied(tmp_path, monkeypatch, spec, options, phase="Running")
    assert outcome.timed_out and outcome.returncode is None
    assert outcome.detail == "no result within sweep.point_timeout_s=0.5 s (the point hung or ran too slowly)"
    assert any(" delete pytorchjob fsdp-" in c for c in calls(tool))


def test_a_hung_pods_flight_recorder_dumps_are_pulled_and_name_the_rank(tmp_path, monkeypatch):
    """The ranks dump at the deadline less the lead (their push interval and a margin): the dumps come
    back through the results URL before the job is deleted, and the record names the culprit."""
    spec = debug_spec("sweep.point_timeout_s=0.5")
    pods, remote = tmp_path / "pods", tmp_path / "bucket"
    dumps = pods / spec.sweep.name / spec.point_id / "flight_recorder"
    shutil.copytree(FLIGHT_RECORDER_FIXTURES / "timed_barrier" / "flight_recorder", dumps)
    scenario = {"phase": "Running", "pods": str(pods), "remote": str(remote)}
    options = {"results_url": f"file://{remote}", "startup_grace_s": 0.2}
    started = dt.datetime.now(dt.timezone.utc)
    request, outcome, tool = applied(tmp_path, monkeypatch, spec, options, **scenario)
    assert outcome.timed_out
    (point_dir,) = request.point_dirs
    assert sorted(p.name for p in (point_dir / "flight_recorder").iterdir()) == ["rank0.json", "rank1.json"]
    (record,) = collect_launch(request, outcome, started)
    assert record.status == "timeout"
    assert (record.hang.collective.seq, [m.rank for m in record.hang.missing]) == (9, [1])
    assert record.error.startswith("hung: rank 1 never entered collective 9 of default_pg (gloo:barrier: ")
    assert record.error.endswith("no result within sweep.point_timeout_s=0.5 s (the point hung or ran too slowly)")


def pod_files(tmp_path: Path, spec, started: str) -> Path:
    """What the pods would leave: a started mark, the record and a rank's profiler trace (beside it a
    file nobody pulls), under <sweep>/<point_id>."""
    from bench.analysis.check.synthetic import make_record

    pods = tmp_path / "pods"
    point = pods / spec.sweep.name / spec.point_id
    point.mkdir(parents=True)
    (point / "started").write_text(started)
    record = make_record([0.1, 0.1, 0.1], spec=spec)
    (point / "result.json").write_text(record.model_dump_json())
    (point / "trace_rank1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    (point / "trace_rank1.json").write_text("{}")
    return pods


def test_succeeded_job_records_come_back_through_the_results_url(tmp_path, monkeypatch):
    spec = debug_spec()
    remote, started = tmp_path / "bucket", "2026-01-02T03:04:05+00:00"
    stale = remote / spec.sweep.name / spec.point_id / "errors" / "rank0.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")  # left by an earlier launch: must not come back
    scenario = {"phase": "Succeeded", "pods": str(pod_files(tmp_path, spec, started)), "remote": str(remote)}
    options = {"results_url": f"file://{remote}"}
    request, outcome, _ = applied(tmp_path, monkeypatch, spec, options, **scenario)
    assert outcome.returncode == 0
    (point_dir,) = request.point_dirs
    assert read_record(point_dir / "result.json").point_id == spec.point_id
    assert sorted(p.name for p in point_dir.glob("trace_rank1*")) == ["trace_rank1.json.gz"]
    assert json.loads(gzip.decompress((point_dir / "trace_rank1.json.gz").read_bytes())) == {"traceEvents": []}
    assert (point_dir / "started").stat().st_mtime == dt.datetime.fromisoformat(started).timestamp()
    assert not (point_dir / "errors").exists()


def test_pod_side_push_mirrors_point_files_and_keeps_the_exit_code(tmp_path):
    local, remote = tmp_path / "scratch", tmp_path / "bucket"
    writer = (
        f"import pathlib; p = pathlib.Path('{local}/s/p1'); p.mkdir(parents=True); "
        "(p / 'started').write_text('x'); (p / '.result.json.tmp').write_text('partial'); raise SystemExit(3)"
    )
    cmd = [sys.executable, "-m", "bench.run.launch.results_sync", "push", str(local), f"file://{remote}"]
    proc = subprocess.run([*cmd, "--every", "0.2", "--", sys.executable, "-c", writer], cwd=REPO, timeout=60)
    assert proc.returncode == 3
    assert sorted(p.relative_to(remote).as_posix() for p in remote.rglob("*") if p.is_file()) == ["s/p1/started"]


def test_pull_skips_unfinished_files_and_push_skips_unchanged(tmp_path):
    local, remote = tmp_path / "scratch", tmp_path / "bucket"
    (local / "s" / "p1" / "errors").mkdir(parents=True)
    (local / "s" / "p1" / "errors" / "rank1.json").write_text('{"rank": 1}')
    (local / "s" / "p1" / "notes.txt").write_text("not pulled")
    sent: dict = {}
    push_tree(local, f"file://{remote}", sent)
    fs, root = filesystem(f"file://{remote}")
    first = fs.info(f"{root}/s/p1/errors/rank1.json")["mtime"]
    push_tree(local, f"file://{remote}", sent)  # nothing changed: nothing sent again
    assert fs.info(f"{root}/s/p1/errors/rank1.json")["mtime"] == first
    target = tmp_path / "results" / "s" / "p1"
    pull_points(f"file://{remote}", [target])
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == ["errors/rank1.json"]


def test_a_render_only_preflight_names_its_job_file_and_stores_no_record(tmp_path, fsdp_bench):
    """`fsdp-bench preflight launcher=kubeflow` (apply=false): the manifest is the product, exit 0."""
    # Rendering starts nothing: the console script's code in this process.
    rc, out, err, _ = fsdp_bench("preflight", "launcher=kubeflow", "nodes=2", f"results_dir={tmp_path}", separate=False)
    assert rc == 0, out + err
    (manifest,) = tmp_path.glob("adhoc/_launches/*-preflight-2x1/pytorchjob.yaml")
    assert out == f"rendered, nothing ran (launcher.apply=false): {manifest}\n"
    assert not list(tmp_path.glob("adhoc/_preflight/*/preflight.json"))
