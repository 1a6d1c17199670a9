"""What `run` and `preflight` share: one point composed and checked before anything launches, and
the locks its measurement holds (not a command: bench/cli.py lists the commands)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class LaunchablePoint:
    point: Any  # bench.config.Point
    options: Any  # bench.schemas.SweepOptions
    launcher: Any  # bench.launch.Launcher
    results_dir: Path

    @property
    def spec(self):
        return self.point.spec

    def locks(self):
        """The sweep folder's lock and, for launches on this host, the host's (bench/locks.py)."""
        from bench.locks import MeasurementLocks, allow_concurrent

        return MeasurementLocks(
            self.results_dir / self.spec.sweep.name,
            self.launcher.runs_here(self.spec),
            self.options.wait,
            allow_concurrent(self.options.allow_concurrent),
            self.options.orphans,
        )


def launchable_point(overrides: list[str], keep: Callable[[str], bool] = lambda problem: True) -> LaunchablePoint:
    """Compose, validate and check the point against its launcher; ConfigError lists what is wrong
    (launch problems filtered by `keep`: a preflight trains on no data, so data problems do not count)."""
    from bench.config import ConfigError, load_point, sweep_options
    from bench.launch import get_launcher

    point = load_point(overrides)
    options = sweep_options(point.config)
    launcher = get_launcher(point.spec.launcher, point.config.get("launcher"))
    launcher.check_available(point.spec)
    results_dir = Path(point.config.get("results_dir") or "results")
    if problems := [p for p in launcher.check_point(point.spec, results_dir) if keep(p)]:
        raise ConfigError(problems)
    return LaunchablePoint(point, options, launcher, results_dir)
