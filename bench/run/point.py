"""One point composed and checked before anything launches, and launched under the locks its
measurement holds: what `fsdp-bench run` and `fsdp-bench preflight` do."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config import toplevel


@dataclass
class LaunchablePoint:
    point: Any  # bench.config.compose.Point
    options: Any  # bench.schema.options.SweepOptions
    launcher: Any  # bench.run.launch.Launcher
    results_dir: Path

    @property
    def spec(self):
        return self.point.spec

    def locks(self):
        """The sweep folder's lock and, for launches on this host, the host's (bench/run/ownership/locks.py)."""
        return measurement_locks(
            self.results_dir / self.spec.sweep.name, self.launcher.runs_here(self.spec), self.options
        )

    def launch(self, specs: list, what: str, **run_group_options) -> tuple[list, int | None]:
        """`run_group` under the point's locks: (records, None), or ([], exit code) (see `run_locked`)."""
        from bench.run.execute import run_group

        def launch(locks):
            return run_group(
                specs, self.launcher, self.results_dir, conditions=locks.conditions, owner=locks.token,
                **run_group_options,
            )  # fmt: skip

        return run_locked(self.locks(), launch, f"interrupted: {what} was recorded as interrupted", [])

    def preflight(self, task) -> tuple[Any, int | None]:
        """The preflight `task` launched alone under the point's locks: (LonePreflight, None), or
        (None, exit code) (see `run_locked`)."""
        from bench.run.preflight import measure_alone

        return run_locked(
            self.locks(),
            lambda locks: measure_alone(task, self.launcher, self.results_dir, locks.conditions, locks.token),
            "interrupted: the preflight was recorded as interrupted",
            None,
        )


def measurement_locks(sweep_dir: Path, runs_here: bool, options):
    """The locks a measurement in `sweep_dir` holds, as the sweep options (`options`) ask."""
    from bench.run.ownership.locks import MeasurementLocks, allow_concurrent

    return MeasurementLocks(
        sweep_dir, runs_here, options.wait, allow_concurrent(options.allow_concurrent), options.orphans
    )


def run_locked(locks, launch: Callable, interrupted: str, nothing: Any) -> tuple[Any, int | None]:
    """`launch(locks)` holding `locks`, with SIGTERM/SIGHUP as interrupts: (its result, None), or
    (nothing, exit code) after saying why on stderr: 2 a lock refused (sweep.wait=false), 1
    interrupted (the line `interrupted`)."""
    from bench.run.execute import Interrupted
    from bench.run.ownership.locks import LockBusy
    from bench.run.ownership.signals import stop_signals_as_interrupt

    try:
        with stop_signals_as_interrupt(), locks:
            return launch(locks), None
    except LockBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return nothing, 2
    except (Interrupted, KeyboardInterrupt):
        print(interrupted, file=sys.stderr)
        return nothing, 1


def launchable_point(overrides: list[str], keep: Callable[[str], bool] = lambda problem: True) -> LaunchablePoint:
    """Compose, validate and check the point against its launcher; ConfigError lists what is wrong
    (launch problems filtered by `keep`: a preflight trains on no data, so data problems do not count)."""
    from bench.config.compose import load_point, sweep_options
    from bench.config.problems import ConfigError
    from bench.run.launch import get_launcher

    point = load_point(overrides)
    options = sweep_options(point.config)
    launcher = get_launcher(point.spec.launcher, point.config.get("launcher"))
    launcher.check_available(point.spec)
    results_dir = toplevel.results_dir(point.config)
    if problems := [p for p in launcher.check_point(point.spec, results_dir) if keep(p)]:
        raise ConfigError(problems)
    return LaunchablePoint(point, options, launcher, results_dir)
