"""The one JSON shape of a predicted point, and the fields a script may pick from it.

Every command that prints or stores predicted points builds each point's object with
`plan_object`: `plan --json` (a list of them), `plan --best --json` (its `top`, `next` and
`beaten_by_not_fitting` lists), and the sweep's records (`RunResult.prediction` under
`sweep.plan=true` and `sweep.autotune`). The object is `point_id`, then what the caller adds
(a search's `rank` and `reason`, autotune's `autotune`), then the prediction's keys
(bench/analysis/planner/predict.py documents them).

`--fields a,b.c` picks dotted keys of these objects (`field_paths` lists them; `pick` and
`value_at` read them, as the report reads a record's prediction), for scripts that want a few
numbers per point instead of every resolved spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from bench.config.problems import ConfigError, did_you_mean

_MISSING = object()
# The resolved spec is long (every model, cluster and train key); the error lists it as one entry.
SPEC = "spec"


def plan_object(point_id: str, prediction: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A predicted point as every command prints or stores it (see the module docstring)."""
    return {"point_id": point_id, **extra, **prediction}


def field_paths(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every dotted key of the objects (nested mappings give `a.b`, and `a` itself), in first-seen order."""
    seen: dict[str, None] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            seen[path] = None
            if isinstance(value, Mapping):
                walk(value, path + ".")

    for obj in objects:
        walk(obj, "")
    return list(seen)


def parse_fields(raw: str, objects: Sequence[Mapping[str, Any]], flag: str = "--fields") -> list[str]:
    """The comma-separated dotted keys of `raw`, each one a key of some object; else a ConfigError
    (one line: the unknown key, a close match, the allowed keys)."""
    fields = [f.strip() for f in raw.split(",") if f.strip()]
    if not fields:
        raise ConfigError([f"{flag}: no field given; allowed: {allowed_text(field_paths(objects))}"])
    for field in fields:
        if all(value_at(obj, field, _MISSING) is _MISSING for obj in objects):
            known = field_paths(objects)  # only now: it walks every object
            hint = did_you_mean(field, known)
            raise ConfigError([f"{flag}: unknown field '{field}'{hint}; allowed: {allowed_text(known)}"])
    return fields


@lru_cache(maxsize=1024)
def _parts(dotted: str) -> tuple[str, ...]:
    # Split once per key, not once per point: a large plan's CSV reads the same keys of every point.
    return tuple(dotted.split("."))


def allowed_text(known: Sequence[str]) -> str:
    """The allowed fields for an error line: every leaf key, the spec's as one entry."""
    nested = {path.rpartition(".")[0] for path in known if "." in path}
    shown = []
    for path in known:
        if path == SPEC:
            shown.append(f"{SPEC}.<any key of the resolved spec, e.g. {SPEC}.model.name>")
        elif path not in nested and not path.startswith(SPEC + "."):
            shown.append(path)
    return ", ".join(shown)


def pick(obj: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """{field: value} for the dotted keys, in their order; None where this object lacks one
    (`value_at` of each, its walk written inline: a large plan's CSV picks 40 keys of every point)."""
    picked = {}
    for field in fields:
        if field in obj:
            picked[field] = obj[field]
            continue
        node: Any = obj
        for key in _parts(field):
            if type(node) is not dict or key not in node:
                node = None
                break
            node = node[key]
        picked[field] = node
    return picked


def value_at(obj: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """The value at a dotted key (`memory_bytes_per_device.total`), `default` where there is none; a
    key holding the dots itself comes first. Also how reports read a record's stored prediction."""
    if dotted in obj:
        return obj[dotted]
    node: Any = obj
    for key in _parts(dotted):
        if type(node) is not dict or key not in node:  # JSON data: plain dicts (no Mapping ABC check needed)
            return default
        node = node[key]
    return node
