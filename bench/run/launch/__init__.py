"""Launchers: one module per way of starting ranks: local.py, slurm.py, kubeflow.py (manifests:
k8s_manifest.py), ray.py (driver: ray_job.py). What they share: base.py (the interface, the point
watch), options.py (typed launcher options), torchrun.py (the torchrun command of cluster launchers), ports.py (a free rendezvous port),
cluster_env.py (NCCL and EFA environment), checkpoint_dir.py (checkpoint-folder checks),
results_sync.py (point folders through an fsspec URL).
"""

from __future__ import annotations

import importlib

from bench.run.launch.base import Launcher, LaunchOutcome, LaunchRequest

LAUNCHER_CLASSES = {
    "local": "LocalLauncher",
    "slurm": "SlurmLauncher",
    "kubeflow": "KubeflowLauncher",
    "ray": "RayLauncher",
}


def get_launcher(name: str, options: dict | None = None) -> Launcher:
    """The launcher for a `launcher=` value, configured by the `launcher` config group's fields.

    Its module is imported only when used (ray, for one, is an optional dependency).
    """
    from bench.config.problems import ConfigError, did_you_mean

    if name not in LAUNCHER_CLASSES:
        hint = did_you_mean(name, LAUNCHER_CLASSES)
        raise ConfigError([f"launcher: unknown launcher '{name}'{hint}; allowed: {', '.join(LAUNCHER_CLASSES)}"])
    try:
        module = importlib.import_module(f"bench.run.launch.{name}")
    except ModuleNotFoundError as exc:
        raise ConfigError([f"launcher: '{name}' is not available in this installation ({exc})"]) from None
    return getattr(module, LAUNCHER_CLASSES[name])(options or {})


__all__ = ["Launcher", "LaunchOutcome", "LaunchRequest", "get_launcher"]
