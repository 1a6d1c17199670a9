"""The report's rerun commands compose back into the very point they came from, knobs included."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.report.frame import records_to_frame  # noqa: E402
from bench.config.compose import load_point  # noqa: E402
from bench.present.report.reproduce import run_command  # noqa: E402


@pytest.mark.parametrize(
    "fields",
    [
        {"train.checkpoint": "sync", "train.checkpoint_every": 2},
        {"train.checkpoint": "async"},
        {"train.activation_checkpointing": "selective_layer", "train.ac_every": 4},
        {"train.activation_checkpointing": "selective_op", "train.ac_save_ops": ["mm", "sdpa"]},
        {"debug.slow_rank": 0},
    ],
)
def test_a_rerun_command_gives_the_same_point(fields):
    record = make_record(**fields)
    (row,) = records_to_frame([record]).to_dict("records")
    command = shlex.split(run_command(row))
    assert command[:2] == ["fsdp-bench", "run"]
    assert load_point(command[2:]).spec.point_id == record.point_id, command
