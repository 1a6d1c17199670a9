"""`hang` of a record: what the ranks' Flight Recorder dumps say of a point that hung (bench/analysis/hang.py).

Set on `timeout` records only. `collective` is the one some ranks entered and others never did; it is
null when every rank had entered every collective it knows (nothing pending: a rank hung outside any
collective), and `unavailable` says why there is no verdict at all (no dump: a launcher that killed
the ranks first, TORCH_FR_BUFFER_SIZE=0, a torch without the dump).
"""

from __future__ import annotations

from pydantic import Field

from bench.schema.base import Strict


class HangCollective(Strict):
    """One collective as a rank's Flight Recorder entry names it."""

    kind: str  # profiling_name, e.g. gloo:barrier
    seq: int  # collective_seq_id within its group
    group: str  # the process group's name ("0" for the default group)
    group_desc: str = ""  # its description (default_pg)
    group_ranks: list[int] = Field(default_factory=list)
    input_sizes: list = Field(default_factory=list)
    output_sizes: list = Field(default_factory=list)
    # What the harness was doing when it issued it, from the ranks that entered it ("the step timer's
    # opening barrier of step 1", "FSDP's reduce-scatter in backward of step 0").
    meaning: str = ""


class MissingRank(Strict):
    rank: int
    last: HangCollective | None = None  # the last collective of the group it entered in this point
    doing: str = ""  # what the harness said it was doing when the dump was written


class HangVerdict(Strict):
    collective: HangCollective | None = None
    entered: list[int] = Field(default_factory=list)
    missing: list[MissingRank] = Field(default_factory=list)
    dumped_ranks: list[int] = Field(default_factory=list)
    unavailable: str | None = None
    summary: str = ""  # the one line that also heads the record's `error`
