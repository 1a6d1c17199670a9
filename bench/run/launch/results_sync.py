"""Point directories through an fsspec URL (`s3://bucket/prefix`), for Kubeflow pods without a shared volume.

Pod side: `python -m bench.run.launch.results_sync push SCRATCH URL --every S -- torchrun ...` runs
the ranks, mirrors SCRATCH (<sweep>/<point_id>/...) to URL every S seconds and once more at
the end, and exits with the ranks' exit code. Launcher side: `pull_points` copies each point's
`started` mark, result.json and errors/ back into its local directory, so PointWatch and the
record collection work exactly as with a shared filesystem. fsspec (and s3fs for s3://) is
imported only here: `pip install fsspec s3fs`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import subprocess
import sys
from pathlib import Path

from bench.schema.files import atomic_path
from bench.schema.protocol import (
    ERRORS_DIR,
    FLIGHT_RECORDER_DIR,
    MEMORY_SNAPSHOT_PREFIX,
    MEMORY_SNAPSHOT_SUFFIX,
    PREFLIGHT_MEASUREMENTS,
    RESULT_FILE,
    STARTED_MARK,
    TELEMETRY_SIDECARS,
    TRACE_PREFIX,
    TRACE_SUFFIX,
    results_relative,
)

INSTALL_HINT = "pip install fsspec s3fs (s3fs for s3:// URLs)"
# What the launcher needs of a point: its start mark, its record (and the record's telemetry
# sidecar and the ranks' profiler traces, written before it), its ranks' failure reasons and Flight Recorder dumps; of a
# preflight, its measurements.
_PULLED = (STARTED_MARK, RESULT_FILE, *TELEMETRY_SIDECARS, PREFLIGHT_MEASUREMENTS)


def filesystem(url: str):
    """(fsspec filesystem, root path without trailing slash) of a URL."""
    try:
        import fsspec
    except ImportError as exc:
        raise ImportError(f"launcher.results_url needs fsspec: {INSTALL_HINT}") from exc
    fs, root = fsspec.core.url_to_fs(url)
    return fs, root.rstrip("/")


def push_tree(local: Path, url: str, sent: dict) -> None:
    """Upload files under `local` that changed since the last push (`sent` remembers what went)."""
    fs, root = filesystem(url)
    for path in sorted(local.rglob("*")):
        if not path.is_file() or path.name.startswith("."):  # .result.json.tmp: not written yet
            continue
        stat, relative = path.stat(), path.relative_to(local).as_posix()
        if sent.get(relative) == (stat.st_mtime_ns, stat.st_size):
            continue
        target = f"{root}/{relative}"
        fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(path), target)
        sent[relative] = (stat.st_mtime_ns, stat.st_size)


def run_and_push(local: Path, url: str, every_s: float, command: list[str]) -> int:
    """Run `command`, mirroring `local` to `url` while it runs and after; its exit code."""
    local.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(command)
    # Kubernetes stops a pod with SIGTERM: pass it on, then push what the ranks left.
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    sent: dict = {}
    while True:
        try:
            returncode = proc.wait(timeout=every_s)
            break
        except subprocess.TimeoutExpired:
            _push_quietly(local, url, sent)
    _push_quietly(local, url, sent)
    return returncode


def _push_quietly(local: Path, url: str, sent: dict) -> None:
    try:
        push_tree(local, url, sent)
    except Exception as exc:  # noqa: BLE001 - a storage hiccup must not kill the ranks; retried next round
        print(f"results_sync: push to {url} failed: {exc}", file=sys.stderr, flush=True)


def remote_point(url_root: str, local_dir: Path) -> str:
    """A point's (or preflight's) directory under the URL root, as under the local results_dir."""
    return "/".join([url_root, *results_relative(local_dir)])


def clear_points(url: str, point_dirs: list[Path]) -> None:
    """Delete the points' files left at the URL by an earlier launch (a stale result must not come back)."""
    fs, root = filesystem(url)
    for local_dir in point_dirs:
        remote = remote_point(root, local_dir)
        if fs.exists(remote):
            fs.rm(remote, recursive=True)


def pull_points(url: str, point_dirs: list[Path]) -> None:
    """Copy new start marks, records and rank errors from the URL into the local point dirs."""
    fs, root = filesystem(url)
    for local_dir in point_dirs:
        remote = remote_point(root, local_dir)
        for remote_file in fs.find(remote):
            relative = remote_file[len(remote) + 1 :]
            wanted = (
                relative in _PULLED
                or (relative.startswith(f"{ERRORS_DIR}/") and relative.endswith(".json"))
                or (relative.startswith(f"{FLIGHT_RECORDER_DIR}/") and relative.endswith(".json"))
                or (relative.startswith(TRACE_PREFIX) and relative.endswith(TRACE_SUFFIX) and "/" not in relative)
                or (
                    relative.startswith(MEMORY_SNAPSHOT_PREFIX)
                    and relative.endswith(MEMORY_SNAPSHOT_SUFFIX)
                    and "/" not in relative
                )
            )
            target = Path(local_dir) / relative
            if not wanted or target.exists():
                continue
            with atomic_path(target) as partial:  # whole files only: the launcher may read at any moment
                fs.get_file(remote_file, str(partial))
            if relative == "started":
                _stamp_started(target)


def _stamp_started(mark: Path) -> None:
    """Give the pulled mark the point's real start time (its content), so deadlines count from there."""
    try:
        started = dt.datetime.fromisoformat(mark.read_text().strip()).timestamp()
    except ValueError:
        return
    os.utime(mark, (started, started))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run.launch.results_sync")
    sub = parser.add_subparsers(dest="action", required=True)
    push = sub.add_parser("push", help="run the command after --, mirroring LOCAL to URL while it runs and after")
    push.add_argument("local", type=Path)
    push.add_argument("url")
    push.add_argument("--every", type=float, default=30.0, help="seconds between pushes")
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not command:
        parser.error("push: give the command after --")
    filesystem(args.url)  # fail before the ranks start when fsspec is missing
    return run_and_push(args.local, args.url, args.every, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
