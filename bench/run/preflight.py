"""Preflights in the run layer: the task a launch carries, and a preflight launched on its own.

A preflight measures a world shape on the same launcher and worker as its points
(fsdp_core/preflight.py); `bench.analysis.preflight` turns what the ranks measured into the record.
It runs either inside the first launch of its shape (a sweep with `sweep.preflight=true`: the task
rides in `run_group(preflight=...)`) or alone (`fsdp-bench preflight`, and `sweep.autotune` with a
preflight, which ranks with what it measured): `measure_alone`, the one launch of a lone preflight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.run.execute import run_group
from bench.run.launch.base import Launcher
from bench.schema.options import PreflightSettings
from bench.schema.preflight import PreflightResult, PreflightSummary
from bench.schema.protocol import PREFLIGHT_DIR, PREFLIGHT_RECORD, PreflightTask, results_relative
from bench.schema.spec import RunSpec


def preflight_dir(results_dir: Path, spec: RunSpec) -> Path:
    """Where a sweep's preflight of this world shape lives (the latest one; a rerun replaces it)."""
    return Path(results_dir) / spec.sweep.name / PREFLIGHT_DIR / f"{spec.nodes}x{spec.gpus_per_node}"


def preflight_task(
    spec: RunSpec, settings: PreflightSettings, strategies: list[str], results_dir: Path
) -> PreflightTask:
    """The preflight of `spec`'s world shape, measuring the process groups of every strategy given."""
    return PreflightTask(
        point_dir=str(preflight_dir(results_dir, spec)),
        spec=spec,
        settings=settings,
        strategies=list(dict.fromkeys(strategies)),
    )


def preflight_summary(result: PreflightResult, task: PreflightTask) -> PreflightSummary:
    """What the records of a world shape keep of its preflight (the record's path relative to the results)."""
    return result.summary("/".join((*results_relative(task.point_dir), PREFLIGHT_RECORD)))


@dataclass
class LonePreflight:
    """What a preflight launched alone left: its record and summary, or the job files a launcher
    that only renders wrote (launcher.apply=false: nothing was measured)."""

    task: PreflightTask
    record: PreflightResult | None = None
    rendered: list[Path] = field(default_factory=list)

    @property
    def summary(self) -> PreflightSummary | None:
        return preflight_summary(self.record, self.task) if self.record is not None else None


def measure_alone(
    task: PreflightTask, launcher: Launcher, results_dir: Path, conditions: dict | None = None, owner: str | None = None
) -> LonePreflight:
    """Launch the preflight by itself (no points) and collect its record."""
    outcome = LonePreflight(task)
    records: list[PreflightResult] = []
    run_group(
        [], launcher, results_dir, preflight=task, on_preflight=records.append, on_rendered=outcome.rendered.extend,
        conditions=conditions, owner=owner,
    )  # fmt: skip
    if records:
        (outcome.record,) = records
    return outcome
