"""Units and how a value is written in them: one home for bytes per GiB and human-readable sizes."""

from __future__ import annotations

GIB = 2**30


def human_bytes(value: float | None) -> str:
    """`1.5 GiB`, `512 B`; `-` for an unknown value."""
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return "-"
