"""Where a store is: a path (an SQLite file, the embedded default) or a database URL
(`postgresql://user@host:port/db`, or libpq's other spelling `postgres://`), told apart by the
scheme, never by whether a file exists. Any other `scheme://` is refused, not taken as a path.

A URL is handed to the driver (libpq) as it is; wherever a store is printed (a store line, an error,
a page, a report) it is `masked`: a password in it shows as `***`.
"""

from __future__ import annotations

import re
from pathlib import Path

URL_SCHEMES = ("postgresql", "postgres")
MASK = "***"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# A password in the URL's user part (user:password@) and as a query parameter (?password=...).
_USER_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*):([^/?#@]*)@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)", re.IGNORECASE)


def scheme(location: str | Path) -> str | None:
    """The URL scheme of `location` (lower case), or None for a path."""
    found = _SCHEME.match(str(location)) if not isinstance(location, Path) else None
    return found.group(1).lower() if found else None


def is_url(location: str | Path) -> bool:
    """Whether `location` is a database URL (a scheme this code opens: `scheme_problem` names the others)."""
    return scheme(location) in URL_SCHEMES


def scheme_problem(key: str, location: str | Path) -> str | None:
    """The one-line complaint about a `scheme://` this code does not open (None for a path or a URL it does)."""
    found = scheme(location)
    if found is None or found in URL_SCHEMES:
        return None
    return (
        f"{key}: {masked(location)}: unknown store scheme '{found}://'; a store is a path (SQLite) or a "
        f"{' or '.join(s + '://' for s in URL_SCHEMES)} URL"
    )


def masked(location: str | Path) -> str:
    """`location` as it may be printed: a URL's password replaced by ***."""
    text = str(location)
    if scheme(text) is None:
        return text
    text = _USER_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    return _QUERY_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}", text)


def secrets(location: str | Path) -> list[str]:
    """The passwords written in a URL (what a message from the driver must never show)."""
    text = str(location)
    found = [m.group(2) for m in _USER_PASSWORD.finditer(text)] if scheme(text) else []
    found += [m.group(2) for m in _QUERY_PASSWORD.finditer(text)] if scheme(text) else []
    return [secret for secret in found if secret]


def scrubbed(message: str, location: str | Path) -> str:
    """`message` with the URL's passwords (also percent-decoded) masked."""
    from urllib.parse import unquote

    for secret in secrets(location):
        for form in {secret, unquote(secret)}:
            message = message.replace(form, MASK)
    return message


def store_problem(key: str, location: str | Path, *, create: bool = False, hint: str = "") -> str | None:
    """Why `location` (given as `key`) cannot be a store, or None: an unknown scheme; for a path, what
    bench/config/paths.py finds (a file to read, or to create when `create`). A URL's server is
    asked only when the store is opened."""
    from bench.config.paths import input_problem, output_problem

    if (problem := scheme_problem(key, location)) or is_url(location):
        return problem
    return output_problem(key, location, "file") if create else input_problem(key, location, "file", hint=hint)


def records_problem(key: str, location: str | Path) -> str | None:
    """Why `location` (given as `key`: a results folder, a result.json or a store) cannot be read, or None."""
    from bench.config.paths import input_problem

    if (problem := scheme_problem(key, location)) or is_url(location):
        return problem
    return input_problem(key, location)


def parsed(location: str | Path) -> str | Path:
    """A URL as it is given (a str), a path as a Path."""
    return str(location) if is_url(location) else Path(location)
