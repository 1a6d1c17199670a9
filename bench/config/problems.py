"""Invalid input, said as one line per problem naming the config key (the CLI prints them, exit 2)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every command imports ConfigError before it knows whether it needs pydantic
    from pydantic import ValidationError


class ConfigError(ValueError):
    """Invalid input: the CLI prints each line and exits 2 before anything launches."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        super().__init__("; ".join(self.lines))


def first_line(exc: Exception) -> str:
    """An exception's first line (its type where it says nothing): how a library's error becomes one line."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def did_you_mean(word: object, allowed: Iterable[object]) -> str:
    """` (did you mean X?)` for the allowed word closest to a mistyped one (difflib's match), or "".

    Every "unknown ..." line puts it right after the word it is about, before its list of what is
    allowed: group options, config keys, allowed values, launcher fields, metrics, flags, commands.
    """
    close = difflib.get_close_matches(str(word), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def describe_validation_error(exc: ValidationError, prefix: str = "") -> list[str]:
    """One line per problem, naming the field as a config key (`train.seq_len`), for exit-2 messages."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-after"))
        msg = err["msg"].removeprefix("Value error, ")
        # A validator that checks a nested field names it first ("peak_tflops.bf16: must be positive").
        named = re.match(r"^([A-Za-z_][\w.]*): (.+)$", msg, re.S)
        if named and err["type"] == "value_error":
            loc, msg = ".".join(p for p in (loc, named[1]) if p), named[2]
        loc = f"{prefix}{loc}" if loc else prefix.rstrip(".").rstrip(":").rstrip()
        if err["type"] == "literal_error":
            allowed = err.get("ctx", {}).get("expected", "")
            hint = did_you_mean(err.get("input"), re.findall(r"'([^']*)'", allowed))
            msg = f"got {err.get('input')!r}{hint}; allowed: {allowed}"
        elif err["type"] in ("bool_type", "bool_parsing"):
            msg = f"got {err.get('input')!r}{did_you_mean(err.get('input'), ('true', 'false'))}; allowed: true, false"
        elif err["type"] == "missing":
            msg = "missing"
        lines.extend(f"{loc}: {part}" if loc else part for part in msg.splitlines())
    return lines
