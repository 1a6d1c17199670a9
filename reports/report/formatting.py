"""Number formatting shared by the HTML and Markdown tables (one place, so both agree)."""

from __future__ import annotations

import math
from typing import Any

from bench.schema.units import GIB

MISSING = "–"


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: Any, digits: int = 0) -> str:
    """1234.5 -> "1,234" (digits=0) or "1,234.50" (digits=2); a dash when missing."""
    if is_missing(value):
        return MISSING
    return f"{float(value):,.{digits}f}"


def significant(value: Any, digits: int = 3) -> str:
    """Step times and similar: three significant digits (0.0123, 1.23, 123)."""
    if is_missing(value):
        return MISSING
    return f"{float(value):.{digits}g}"


def percent(fraction: Any, digits: int = 1) -> str:
    """0.95 -> "95.0 %"."""
    if is_missing(fraction):
        return MISSING
    return f"{float(fraction) * 100:.{digits}f} %"


def percent_ci(fraction: Any, low: Any, high: Any) -> str:
    """ "95.0 % [91.2, 98.7]" where a bootstrap interval exists, else just the percentage."""
    text = percent(fraction)
    if is_missing(low) or is_missing(high):
        return text
    return f"{text} [{float(low) * 100:.1f}, {float(high) * 100:.1f}]"


def number_ci(value: Any, low: Any, high: Any) -> str:
    text = number(value)
    if is_missing(low) or is_missing(high):
        return text
    return f"{text} [{number(low)}, {number(high)}]"


def gib(num_bytes: Any) -> str:
    if is_missing(num_bytes):
        return MISSING
    return f"{float(num_bytes) / GIB:.2f}"
