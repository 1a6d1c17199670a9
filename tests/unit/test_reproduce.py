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
from reports.report.reproduce import run_command  # noqa: E402


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


def test_the_commands_of_a_frame_are_each_rows_command():
    """run_commands (a column at a time) writes run_command's text for every row: knobs, variants, a
    non-default bool, a column where ints and floats meet (12 and 12.0 written apart), a NaN, a numpy
    bool among Python values, 0.0 beside -0.0."""
    import numpy as np
    import pandas as pd

    from reports.report.reproduce import RUN_COLUMNS, run_commands

    records = [
        make_record(),
        make_record(**{"train.compile": True}),
        make_record(**{"train.activation_checkpointing": "selective_op", "train.ac_save_ops": ["mm", "sdpa"]}),
        make_record(**{"debug.slow_rank": 0}),
    ]
    frame = records_to_frame(records)[RUN_COLUMNS]
    frame = pd.concat([frame, frame.iloc[:2], frame.iloc[:2]], ignore_index=True)
    frame = frame.astype({"steps": object, "cpu_offload": object, "warmup_steps": float})
    frame.loc[4, "steps"], frame.loc[5, "cpu_offload"] = 12.0, float("nan")
    frame.loc[6, "cpu_offload"], frame.loc[7, "warmup_steps"], frame.loc[6, "warmup_steps"] = np.True_, -0.0, 0.0
    expected = [run_command(row) for row in frame.to_dict("records")]
    assert run_commands(frame) == expected
    assert "train.steps=12.0" in expected[4] and "train.cpu_offload=nan" in expected[5]
    assert "train.cpu_offload=true" in expected[6] and "train.warmup_steps=-0.0" in expected[7]
    assert "train.compile=true" in expected[1] and expected[0] != expected[1]
    assert len(set(expected[:4])) == 4
