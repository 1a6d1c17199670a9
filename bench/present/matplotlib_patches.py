"""The figure workers' functions put in place of matplotlib's (`replace`), for the matplotlib they were
written against: text_layout.py, text_glyphs.py, tick_copies.py, marker_styles.py and legend_packing.py
each read or replace private parts of matplotlib 3.10 (pinned below 3.11 in pyproject.toml). Another
version is left as it is: its figures are drawn by matplotlib's own functions, the same figures, slower.
(fonts.py checks the signature of the font cache it replaces instead: its replacement needs nothing else.)
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

# The matplotlib whose private parts the replacements were written against.
KNOWN_VERSION = (3, 10)


def is_known_matplotlib() -> bool:
    """Whether this matplotlib is the version the replacements were written against."""
    return tuple(int(part) for part in matplotlib.__version__.split(".")[:2]) == KNOWN_VERSION


def replace(replacements: Sequence[tuple[object, str, object]]) -> bool:
    """Put each (owner, name, function) in place of `owner.name` where this matplotlib is the known
    version: True when they are in place (now, or before: installing twice is installing once), False
    where they are not (nothing is changed then)."""
    if all(getattr(owner, name) is function for owner, name, function in replacements):
        return True
    if not is_known_matplotlib():
        return False
    for owner, name, function in replacements:
        setattr(owner, name, function)
    return True
