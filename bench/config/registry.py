"""Where configs come from: the shipped tree `sweeps/` plus the user's own config folders.

The YAML files are the registry: every model, cluster and device the harness knows is a file
under a group folder (`model/`, `cluster/`, `device/`, `strategy/`, `precision/`, `launcher/`,
`experiment/`). A user adds their own in a folder of the same layout and names it with
`--config-dir DIR` (Hydra's flag and meaning) or `FSDP_BENCH_CONFIG_DIR` (os.pathsep-separated;
what the CLI flag sets, so every process it starts sees the same registry).

A user file may not take a shipped name: records carry the facts they ran with, but a report
that shows two different `p5.48xlarge`s would still mislead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the console script imports this module for every command; most never need the devices
    from bench.schema.devices import PeakEntry

SHIPPED = Path(__file__).resolve().parents[2] / "sweeps"
CONFIG_DIR_ENV = "FSDP_BENCH_CONFIG_DIR"
# Groups a point selects from (one option each); `device` is selected by a cluster's defaults.
GROUPS = ("model", "strategy", "precision", "cluster", "launcher", "experiment")
REGISTRY_GROUPS = ("model", "cluster", "device")


class RegistryError(ValueError):
    """A config folder or file that cannot be used (one line, exit 2)."""


def user_dirs() -> tuple[Path, ...]:
    """The user's config folders, in the order given (FSDP_BENCH_CONFIG_DIR)."""
    return _resolved(os.environ.get(CONFIG_DIR_ENV, ""), os.getcwd())


@lru_cache(maxsize=64)
def _resolved(raw: str, cwd: str) -> tuple[Path, ...]:
    """(cached: composing a grid asks for the folders several times per point)"""
    return tuple(Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip())


def add_user_dirs(dirs: Sequence[str | Path]) -> None:
    """Put `--config-dir` folders in front of FSDP_BENCH_CONFIG_DIR, checked to exist."""
    from bench.config.paths import input_problem

    resolved = []
    for entry in dirs:
        path = Path(entry).expanduser().resolve()
        if problem := input_problem("--config-dir", Path(entry).expanduser(), "folder"):
            raise RegistryError(problem)
        resolved.append(str(path))
    existing = [p for p in os.environ.get(CONFIG_DIR_ENV, "").split(os.pathsep) if p.strip()]
    os.environ[CONFIG_DIR_ENV] = os.pathsep.join(dict.fromkeys([*resolved, *existing]))


def search_dirs() -> tuple[Path, ...]:
    """Shipped tree first, then the user's folders."""
    return (SHIPPED, *user_dirs())


def option_files(group: str, dirs: tuple[Path, ...] | None = None) -> dict[str, Path]:
    """name -> file of every selectable option of a group (files starting with `_` are not options),
    in `dirs` (default: `search_dirs()`)."""
    return _option_files(group, search_dirs() if dirs is None else dirs)


@lru_cache(maxsize=64)
def _option_files(group: str, dirs: tuple[Path, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in dirs:
        for path in sorted((root / group).glob("*.yaml")):
            if path.stem.startswith("_"):
                continue
            if path.stem in found:
                raise RegistryError(
                    f"{path}: {group} '{path.stem}' is already defined by {found[path.stem]}; give yours another name"
                )
            found[path.stem] = path
    return found


def group_options(group: str) -> list[str]:
    return sorted(option_files(group))


def is_user_file(path: Path) -> bool:
    return not Path(path).resolve().is_relative_to(SHIPPED)


def describe_source(group: str, name: str) -> str:
    """How an error names a group option: the user's file path, or the shipped option's name."""
    path = option_files(group).get(name)
    return f"{group} '{name}' ({path})" if path and is_user_file(path) else f"{group} '{name}'"


def load_device(name: str) -> dict[str, Any]:
    """One device file as plain data (devices have no defaults list)."""
    return load_plain("device", name)


def peak_table() -> list[PeakEntry]:
    """Every known device's runtime names and peaks: ranks match the device torch reports against
    it (MFU), whatever the cluster preset says."""
    from bench.schema.devices import PeakEntry

    return [
        PeakEntry(device=d["name"], match=list(d.get("match") or []), peak_tflops=dict(d.get("peak_tflops") or {}))
        for d in map(load_device, group_options("device"))
    ]


def match_device(device_name: str) -> PeakEntry | None:
    """The device entry for a runtime name (torch.cuda.get_device_name()), matched exactly, or None."""
    from bench.schema.devices import match_peak

    return match_peak(peak_table(), device_name)


def load_plain(group: str, name: str) -> dict[str, Any]:
    """An option file as plain data (for groups whose files have no defaults list: model, device)."""
    import yaml

    files = option_files(group)
    if name not in files:
        from bench.config.problems import did_you_mean

        raise RegistryError(
            f"{group}: unknown {group} '{name}'{did_you_mean(name, files)}; allowed: {', '.join(sorted(files))}"
        )
    data = yaml.safe_load(files[name].read_text()) or {}
    if not isinstance(data, dict):
        raise RegistryError(f"{files[name]}: expected a mapping of fields")
    return data
