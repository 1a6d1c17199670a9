"""What changed between two runs of a series: software, driver, code, NCCL/EFA variables, debug knobs.

Shown beside every change point (the last run before it against the first run after it), so the
upgrade that coincides with a step is named: `torch: 2.12.0 -> 2.13.0`, `git: 1a2b3c4d5e6f..
6f5e4d3c2b1a`, `NCCL_ALGO: Ring -> Tree`, `debug.slow_fraction: 0.0 -> 0.1`. The `debug` knobs are
not part of a series' key (bench.analysis.stats.series_key), so an injected slowdown shows up here, like an
environment change.
"""

from __future__ import annotations

from bench.schema.record import RunResult

# Environment fields compared, in the order shown (driver: recorded on CUDA by newer fsdp-bench;
# harness: the fsdp-bench version that ran it, e.g. a new cluster image).
ENV_FIELDS = ("torch", "cuda", "nccl", "driver", "harness", "device_name", "python", "platform")
# The variables that change collectives (NCCL) and the EFA/libfabric transport (FI_).
VARIABLE_PREFIXES = ("NCCL_", "FI_")
SHA_CHARS = 12


def env_changes(before: RunResult, after: RunResult) -> list[str]:
    """One `name: old -> new` item per difference (empty when nothing recorded changed)."""
    old, new = before.env, after.env
    changes = [
        f"{name}: {getattr(old, name)} -> {getattr(new, name)}"
        for name in ENV_FIELDS
        if getattr(old, name) != getattr(new, name)
    ]
    if (old.git_sha, old.git_dirty) != (new.git_sha, new.git_dirty):
        changes.append(f"git: {_sha(old.git_sha, old.git_dirty)}..{_sha(new.git_sha, new.git_dirty)}")
    changes += _variable_changes(old.env_vars, new.env_vars)
    changes += _debug_changes(before, after)
    return changes


def _sha(sha: str | None, dirty: bool | None) -> str:
    return (sha or "unknown")[:SHA_CHARS] + ("+dirty" if dirty else "")


def _variable_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    names = sorted(n for n in set(old) | set(new) if n.startswith(VARIABLE_PREFIXES) and old.get(n) != new.get(n))
    return [f"{n}: {old.get(n, '(unset)')} -> {new.get(n, '(unset)')}" for n in names]


def _debug_changes(before: RunResult, after: RunResult) -> list[str]:
    old, new = before.spec.debug.model_dump(), after.spec.debug.model_dump()
    return [f"debug.{k}: {old.get(k)} -> {new.get(k)}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
