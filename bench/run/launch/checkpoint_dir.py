"""Checks of a point's checkpoint folder that only the host running it can make, before launch.

Kept out of the launch rules (bench/config/rules.py): whether a folder is writable, or holds a checkpoint,
is a fact of this host's file system now, not of the point. An fsspec URL is not looked at here:
what its storage says shows at run time, as a `failed` record with its one-line reason.
"""

from __future__ import annotations

from pathlib import Path

from bench.config.paths import output_problem, read_only_error
from bench.schema.protocol import CHECKPOINT_MARKER, checkpoint_location, is_url, point_dir, read_local_marker
from bench.schema.spec import RunSpec


def checkpoint_problems(spec: RunSpec, results_dir: Path) -> list[str]:
    """A checkpoint folder that cannot be written, or `train.resume=true` with nothing to resume from."""
    train = spec.train
    if not train.checkpoints:
        return []
    location = checkpoint_location(train, point_dir(results_dir, spec))
    if is_url(location):
        return []
    problems = []
    if train.checkpoint != "none":
        # Only the ranks write here, once launched: a read-only disk is refused now, as the storage fault it is.
        if fault := read_only_error(location):
            raise fault
        if problem := output_problem("train.checkpoint_dir", location, "folder"):
            problems.append(problem)
    if train.resume and read_local_marker(location) is None:
        problems.append(
            f"train.resume: no complete checkpoint in {location} (no '{CHECKPOINT_MARKER}' marker naming a "
            "step folder with DCP metadata); allowed: false, or a train.checkpoint_dir holding one"
        )
    return problems
