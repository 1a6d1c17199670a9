"""Units and how a value is written in them: one home for bytes per GiB and human-readable sizes."""

from __future__ import annotations

GIB = 2**30


# Count suffixes a user may write (`plan --tokens 2T`): thousands, millions, billions (B or G), trillions.
COUNT_SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(text: str) -> float:
    """`2T` -> 2e12, `1.5B` -> 1.5e9, `5e11` -> 5e11; ValueError for anything else or a count <= 0."""
    raw = str(text).strip()
    scale = COUNT_SUFFIXES.get(raw[-1:].upper(), 1.0) if raw else 1.0
    number = raw[:-1] if scale != 1.0 else raw
    value = float(number) * scale  # ValueError for a bad number
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"not a positive count: {text!r}")
    return value


def human_bytes(value: float | None) -> str:
    """`1.5 GiB`, `512 B`; `-` for an unknown value."""
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return "-"
