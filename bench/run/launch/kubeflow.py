"""`launcher=kubeflow`: each launch becomes a Kubeflow PyTorchJob (manifests: k8s_manifest.py).

With `launcher.apply=false` (the default) a launch only renders `<work_dir>/pytorchjob.yaml` (the
ConfigMap with the pod-side launch file, then the PyTorchJob), prints where it is, and returns
an outcome with detail "rendered": nothing ran, so nothing may be recorded for its points.

With `launcher.apply=true` it applies the manifests with kubectl, waits on the job's conditions
(the point deadline starts once the job is Running, so image pulls and scheduling never count as
a hang), saves the pods' logs, and deletes the job on timeout, Ctrl-C, or when done. Records come
from the shared results location: a PVC mounted in the pods at `results_mount` that this machine
sees as results_dir, or an fsspec URL (`results_url`) mirrored both ways (results_sync.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.run.launch.base import LaunchOutcome, LaunchRequest, PointWatch, forget_job, note_job
from bench.run.launch.k8s_manifest import KubeflowOptions, job_name, render_configmap, render_pytorchjob
from bench.run.launch.options import ConfiguredLauncher

RENDERED = "rendered"  # LaunchOutcome.detail of a launch that was rendered, not run (apply=false)
KUBECTL_TIMEOUT_S = 120


class KubeflowLauncher(ConfiguredLauncher):
    name = "kubeflow"
    options_class = KubeflowOptions

    def check_available(self, spec) -> None:
        """Rendering needs nothing; apply=true needs kubectl, a context and a shared results location."""
        from bench.config.problems import ConfigError

        problem = apply_problem(self.opts) if self.opts.apply else None
        if problem:
            raise ConfigError([problem])

    def launch(self, request: LaunchRequest) -> LaunchOutcome:
        manifest = write_manifests(request, self.opts)
        if not self.opts.apply:
            print(
                f"kubeflow: rendered {manifest} (launcher.apply=false: nothing ran; `kubectl apply -f` it, "
                "or rerun with launcher.apply=true)",
                file=sys.stderr,
            )
            return LaunchOutcome(returncode=0, detail=RENDERED, log_files=[manifest], rendered=True)
        return KubeJob(request, self.opts, manifest).run()

    def job_running(self, job_id: str) -> bool:
        """A PyTorchJob that exists and has neither succeeded nor failed."""
        out = kubectl(self.opts, "get", "pytorchjob", job_id, "--ignore-not-found", "--output", "json")
        if out.returncode != 0 or not out.stdout.strip():
            return False
        conditions = (json.loads(out.stdout).get("status") or {}).get("conditions") or []
        return not any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions)

    def stop_job(self, job_id: str) -> None:
        delete_job(self.opts, job_id)


def write_manifests(request: LaunchRequest, opts: KubeflowOptions) -> Path:
    """`<work_dir>/pytorchjob.yaml`: the ConfigMap, then the PyTorchJob (one `kubectl apply -f`)."""
    import yaml

    path = request.work_dir / "pytorchjob.yaml"
    docs = [render_configmap(request, opts), render_pytorchjob(request, opts)]
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False, width=1000))
    return path


def apply_problem(opts: KubeflowOptions) -> str | None:
    """Why `launcher.apply=true` cannot work here, or None."""
    if shutil.which(opts.kubectl) is None:
        return (
            f"launcher.apply: true needs kubectl on PATH ('{opts.kubectl}' not found; install kubectl and "
            "`aws eks update-kubeconfig --name <cluster>`), or set launcher.apply=false to render only"
        )
    args = ["config", "get-contexts", opts.context] if opts.context else ["config", "current-context"]
    out = subprocess.run([opts.kubectl, *args], capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S)
    if out.returncode != 0:
        reason = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"exit code {out.returncode}"]
        return (
            f"launcher.apply: true needs a kubectl context ({reason[0]}); "
            "run `aws eks update-kubeconfig --name <cluster>` or set launcher.context"
        )
    if not (opts.results_pvc or opts.results_url):
        return "launcher.results_pvc: apply=true needs a shared results location: results_pvc or results_url"
    if opts.results_url:
        try:
            import fsspec  # noqa: F401
        except ImportError:
            return "launcher.results_url: needs fsspec on this machine: pip install fsspec s3fs"
    return None


def kubectl(opts: KubeflowOptions, *args: str) -> subprocess.CompletedProcess:
    """`kubectl [--context C] --namespace N ARGS...` (an argument list)."""
    context = ["--context", opts.context] if opts.context else []
    cmd = [opts.kubectl, *context, "--namespace", opts.namespace, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S)


def delete_job(opts: KubeflowOptions, name: str) -> None:
    """Delete a PyTorchJob (its pods go with it) and its launch ConfigMap."""
    kubectl(opts, "delete", "pytorchjob", name, "--ignore-not-found", "--wait=false")
    kubectl(opts, "delete", "configmap", f"{name}-launch", "--ignore-not-found", "--wait=false")


class KubeJob:
    """One applied PyTorchJob: apply, wait on its conditions, collect, clean up."""

    def __init__(self, request: LaunchRequest, opts: KubeflowOptions, manifest: Path) -> None:
        self.request, self.opts, self.manifest = request, opts, manifest
        self.name = job_name(request)
        self.status_log = request.work_dir / "job_status.log"
        self.pods_log = request.work_dir / "pods.log"

    def kubectl(self, *args: str) -> subprocess.CompletedProcess:
        return kubectl(self.opts, *args)

    def outcome(self, returncode: int | None, **kwargs) -> LaunchOutcome:
        return LaunchOutcome(returncode=returncode, log_files=[self.status_log, self.pods_log], **kwargs)

    def run(self) -> LaunchOutcome:
        if self.opts.results_url:
            from bench.run.launch.results_sync import clear_points

            clear_points(self.opts.results_url, self.request.item_dirs)
        applied = self.kubectl("apply", "-f", str(self.manifest))
        if applied.returncode != 0:
            self.status_log.write_text(f"error: kubectl apply failed: {applied.stderr.strip()}\n")
            return self.outcome(applied.returncode, detail="kubectl apply failed")
        try:
            note_job(self.request.work_dir, "kubeflow", self.name, self.opts.model_dump(mode="json"))
            outcome = self.wait()
        except KeyboardInterrupt:
            self.collect(delete=True)
            outcome = self.outcome(None, interrupted=True, detail="interrupted")
        except BaseException:  # e.g. a full results disk: never leave the job running
            delete_job(self.opts, self.name)
            raise
        forget_job(self.request.work_dir)
        return outcome

    def wait(self) -> LaunchOutcome:
        """Poll the job's conditions until Succeeded or Failed, enforcing queue and point deadlines."""
        watch, applied_at = None, time.time()
        while True:
            conditions, error = self.conditions()
            self.pull()
            if error or conditions.get("Succeeded") or conditions.get("Failed"):
                return self.finish(conditions, error)
            if watch is None and conditions.get("Running"):
                watch = PointWatch(self.request, self.opts.startup_grace_s)  # scheduled and pulled: clock starts
            if watch is not None and watch.expired():
                self.collect(delete=True)
                return self.outcome(None, timed_out=True, detail=watch.describe_timeout())
            queued_s = time.time() - applied_at
            if watch is None and self.opts.queue_timeout_s and queued_s > self.opts.queue_timeout_s:
                self.collect(delete=True)
                detail = (
                    f"PyTorchJob {self.name} not running after launcher.queue_timeout_s={self.opts.queue_timeout_s:g} s"
                )
                return self.outcome(None, timed_out=True, detail=detail)
            time.sleep(self.opts.poll_s)

    def conditions(self) -> tuple[dict, str | None]:
        """({condition type: (reason, message)} of the conditions now True, error or None)."""
        out = self.kubectl("get", "pytorchjob", self.name, "--output", "json")
        if out.returncode != 0:
            return {}, f"kubectl get pytorchjob {self.name}: {out.stderr.strip()}"
        status = json.loads(out.stdout).get("status") or {}
        return {
            c["type"]: (c.get("reason", ""), c.get("message", ""))
            for c in status.get("conditions") or []
            if c.get("status") == "True"
        }, None

    def finish(self, conditions: dict, error: str | None) -> LaunchOutcome:
        """Collect records and logs of an ended job; a failure's reason goes to job_status.log."""
        self.collect(delete=not self.opts.keep_finished)
        if conditions.get("Succeeded") and not error:
            self.status_log.write_text(f"PyTorchJob {self.name} succeeded\n")
            return self.outcome(0)
        reason, message = conditions.get("Failed", ("", error or "ended without success"))
        self.status_log.write_text(f"error: PyTorchJob {self.name} failed: {reason} {message}".rstrip() + "\n")
        return self.outcome(1, detail=f"PyTorchJob failed: {message}")

    def pull(self) -> None:
        if not self.opts.results_url:
            return  # the PVC is this machine's results_dir: the files are already here
        from bench.run.launch.results_sync import pull_points

        try:
            pull_points(self.opts.results_url, self.request.item_dirs)
        except Exception as exc:  # noqa: BLE001 - a storage hiccup is retried on the next poll
            print(f"kubeflow: pulling results from {self.opts.results_url} failed: {exc}", file=sys.stderr)

    def collect(self, delete: bool) -> None:
        """Save the pods' logs and the last records; delete the job and its ConfigMap if asked."""
        selector = f"training.kubeflow.org/job-name={self.name}"
        many = f"--max-log-requests={max(5, self.request.nodes)}"  # one stream per pod
        logs = self.kubectl("logs", "--selector", selector, "--all-containers", "--prefix", "--tail=-1", many)
        self.pods_log.write_text(logs.stdout + logs.stderr)
        self.pull()
        if delete:
            delete_job(self.opts, self.name)
