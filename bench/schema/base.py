"""What every schema type shares: strict models (unknown fields refused) and the status a run ends in."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Status = Literal["ok", "oom", "failed", "timeout", "invalid", "interrupted", "skipped"]

STATUSES: tuple[str, ...] = Status.__args__

DeviceType = Literal["cpu", "cuda"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def positive(value: float, name: str) -> float:
    if isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name}: must be positive, got {value:g}")
    return value
