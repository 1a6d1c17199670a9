"""`plan --json` text: byte for byte `json.dumps(objects, indent=2)`, written by a compiled encoder;
`plan --fields`: a few keys per point, one line each.

The standard library indents with its pure-Python encoder, value by value: a big plan's text cost
more than planning it (docs/results/planner.md). pydantic-core (the validation library's engine,
already a dependency) writes the same layout in compiled code; where its spelling differs from the standard library's, this module rewrites it:

- floats with a decimal exponent of -5 (1e-05 <= |x| < 1e-04): written positionally
  (`0.00002708`) where Python writes `2.708e-05`;
- single-digit negative exponents: `4.8e-6` where Python writes `4.8e-06`;
- DEL (U+007F) inside strings, left raw where `ensure_ascii` escapes it (`\\u007f`).

In indented JSON every number ends its line (after `": "` or an array's indentation) and no string
does, so these rewrites touch numbers and strings only where they should. Every other float
agrees with `float.__repr__` (tests/unit/test_planner_output.py compares both encoders on plan
objects and on floats across the whole double range). Where pydantic-core is missing or its
`to_json` has no `ensure_ascii` (older releases), the standard library writes the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# Both patterns start with a literal, which the regex engine scans for fast (a lookbehind would
# make it try every position of 49 MB). A line that ends without a quote ends with a number.
# A number that ends its line, written with a one-digit negative exponent.
_SHORT_EXPONENT = re.compile(r"e-(\d)(?=,?$)", re.MULTILINE)
# The tail of a number that ends its line and lies between 1e-05 and 1e-04 in magnitude, written
# positionally; `_positional_e5` makes sure it is the whole number (not the end of `10.00001`).
_POSITIONAL_E5 = re.compile(r"0\.0000[1-9]\d*(?=,?$)", re.MULTILINE)


def plan_json(objects: Sequence[Any]) -> str:
    """`json.dumps(objects, indent=2)` of plan objects (string keys, JSON values), faster."""
    try:
        from pydantic_core import to_json

        raw = to_json(objects, indent=2, ensure_ascii=True)
    except (ImportError, TypeError):  # an older pydantic-core: no ensure_ascii
        return json.dumps(objects, indent=2)
    text = raw.decode("ascii").replace("\x7f", "\\u007f")
    text = _POSITIONAL_E5.sub(_positional_e5, text)
    return _SHORT_EXPONENT.sub(r"e-0\1", text)


def _positional_e5(match: re.Match) -> str:
    whole = match.string[match.start() - 1] in " -"  # after `": `, an array's indentation, or a minus sign
    return _python_spelling(match.group()) if whole else match.group()


@lru_cache(maxsize=4096)
def _python_spelling(number: str) -> str:
    # A plan repeats a few such numbers (latencies) in every point.
    return repr(float(number))


def fields_json(objects: Sequence[Any], fields: Sequence[str]) -> str:
    """`--fields`: a JSON list of the chosen dotted keys of each object, one compact object per line."""
    from bench.analysis.planner.plan_object import pick

    if not objects:
        return "[]"
    return "[\n" + ",\n".join(json.dumps(pick(obj, fields)) for obj in objects) + "\n]"
