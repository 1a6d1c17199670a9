"""What makes two points the same point: the identity role each spec field declares where it is declared.

A point's id is the sha256 of its identity (`RunSpec.identity()`); `check` matches a run with its
baseline on it and `history` groups runs into series by it. So every field of the spec, at every
depth (model, cluster, device, train, debug, telemetry, sweep), carries a `Role` in its annotation:

    dim: Annotated[int, IN] = Field(ge=1, strict=True)
    source: Annotated[str, DESCRIBES] = ""
    checkpoint: Annotated[CheckpointMode, LATER] = "none"

and `identity_of(spec)` reads the declarations: a field is in the identity (`IN`), left out of it
(`WHERE`, `HOW`, `DESCRIBES`, `OBSERVES`: excluded, and why), or a later addition (`LATER`: in
only when set away from its default, so the points measured before it existed keep their ids). A role also says whether `check` matches on
the field (not on the repeat index: repeats are pooled; not on a slowdown knob: a slowed run is
compared with its clean baseline) and whether a history series keeps it, and may name the only
mode under which a knob counts (`only_under`) and an older name the identity keeps for a value
(`Legacy`). An excluded field's fields declare roles too (`tests/unit/test_identity_roles.py`
fails on a field without one), but the whole subtree stays out.

The lists other modules used to keep beside the fields (`LATER_FIELDS`, `SLOWDOWN_KNOBS`, check's
and history's dropped fields) are `paths(...)` of these declarations.
"""

from __future__ import annotations

import functools
import hashlib
import json
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

# Why a field stays out of the identity: it says where a point runs (a results or checkpoint folder,
# the sweep it was run in), how it runs (how patiently, whether it resumes), or only describes it
# (a source link, the model's sequence limits, the cluster's facts beyond its name and device
# type) or observes it (telemetry). None of these changes what is measured.
Reason = Literal["where", "how", "describes", "observes"]
REASONS: tuple[str, ...] = typing.get_args(Reason)

FieldPath = tuple[str, ...]  # a field's keys from the top of the spec: ("train", "ac_every")


@dataclass(frozen=True)
class Legacy:
    """A value the identity says by an older name: `value`, while the sibling fields `when` have
    the given values, enters the identity as `name` (the name the point was first measured under)."""

    value: Any
    when: tuple[tuple[str, Any], ...]
    name: Any


@dataclass(frozen=True)
class Role:
    """One field's part in the identity (see the module docstring)."""

    enters: Literal["in", "excluded", "later"]
    reason: Reason | None = None  # why an excluded field is excluded
    check: bool = True  # check matches points on it
    slowdown: bool = False  # check compares a run with it set against the clean baseline
    series: bool = True  # a history series key keeps it
    only_under: tuple[str, Any] | None = None  # (sibling field, value): counts only while the sibling has it
    legacy: Legacy | None = None

    def __post_init__(self) -> None:
        if (self.enters == "excluded") != (self.reason is not None):
            raise ValueError(f"a Role gives a reason exactly when it is excluded: {self}")
        if self.reason is not None and self.reason not in REASONS:
            raise ValueError(f"Role reason {self.reason!r}; allowed: {', '.join(REASONS)}")

    @property
    def matched(self) -> bool:
        """Whether check's matching identity keeps the field."""
        return self.check and not self.slowdown


IN = Role("in")
LATER = Role("later")
WHERE, HOW, DESCRIBES, OBSERVES = (Role("excluded", reason=reason) for reason in REASONS)


def role_of(field: FieldInfo) -> Role | None:
    """The role a field declares (the `Role` in its `Annotated[...]`), None where it declares none."""
    roles = [item for item in field.metadata if isinstance(item, Role)]
    if len(roles) > 1:
        raise TypeError(f"a field declares more than one identity role: {roles}")
    return roles[0] if roles else None


@dataclass(frozen=True)
class _Entry:
    """One field as the identity walk reads it (cached per model: declarations do not change)."""

    name: str
    role: Role
    section: type[BaseModel] | None  # the model the field is, when it is a section of the spec
    default: Any = None  # a later field's default, as JSON


@functools.cache
def _entries(model: type[BaseModel]) -> tuple[_Entry, ...]:
    entries = []
    for name, field in model.model_fields.items():
        role = role_of(field)
        if role is None:
            raise TypeError(f"{model.__name__}.{name} declares no identity role (bench/schema/identity.py)")
        default = None
        if role.enters == "later":
            if field.is_required():
                raise TypeError(f"{model.__name__}.{name}: a later field needs a default (absent means default)")
            default = to_jsonable_python(field.get_default(call_default_factory=True))
        entries.append(_Entry(name, role, _submodel(field), default))
    return tuple(entries)


def submodels(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models a field's type holds (itself, or inside Optional, list, dict, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from submodels(arg)


def _submodel(field: FieldInfo) -> type[BaseModel] | None:
    """The model a field is (a section of the spec), None for a plain value."""
    annotation = field.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def declarations(model: type[BaseModel], prefix: FieldPath = ()) -> Iterator[tuple[FieldPath, Role | None]]:
    """Every field of `model` and of every model below it (excluded ones included), with its role."""
    for name, field in model.model_fields.items():
        yield (*prefix, name), role_of(field)
        for inner in submodels(field.annotation):
            yield from declarations(inner, (*prefix, name))


def paths(model: type[BaseModel], chosen: Callable[[Role], bool]) -> tuple[FieldPath, ...]:
    """The identity's fields whose role is `chosen` (a chosen section counts whole: not looked into)."""
    found: list[FieldPath] = []
    for entry in _entries(model):
        if entry.role.enters == "excluded":
            continue
        if chosen(entry.role):
            found.append((entry.name,))
        elif entry.section is not None:
            found += [(entry.name, *path) for path in paths(entry.section, chosen)]
    return tuple(found)


def without(identity: dict[str, Any], dropped: tuple[FieldPath, ...]) -> dict[str, Any]:
    """A copy of an identity without the fields at `dropped` (sections copied where they change)."""
    result = dict(identity)
    for path in dropped:
        node = result
        for name in path[:-1]:
            if not isinstance(node.get(name), dict):
                break
            node[name] = node = dict(node[name])
        else:
            node.pop(path[-1], None)
    return result


@functools.cache
def _exclude(model: type[BaseModel]) -> dict[str, Any]:
    """model_dump's `exclude` for the excluded fields, at every depth (read, never changed)."""
    exclude: dict[str, Any] = {}
    for entry in _entries(model):
        if entry.role.enters == "excluded":
            exclude[entry.name] = True
        elif entry.section is not None and (below := _exclude(entry.section)):
            exclude[entry.name] = below
    return exclude


@functools.cache
def _ruled(model: type[BaseModel]) -> tuple[_Entry, ...]:
    """The fields the walk must visit after the dump: sections, and fields with a rule of their own."""
    return tuple(
        e
        for e in _entries(model)
        if e.role.enters != "excluded"
        and (e.section is not None or e.role.enters == "later" or e.role.only_under or e.role.legacy)
    )


def _apply_rules(model: type[BaseModel], node: dict[str, Any], done: frozenset[str] = frozenset()) -> None:
    """The rules beyond exclusion, on one dumped section (then on the sections below it, but those
    in `done`, whose rules are applied already): a knob only under its mode, the legacy names, and a
    later field dropped at its default. The first two read the section as dumped, before any rule
    changed it."""
    as_dumped = dict(node)
    for entry in _ruled(model):
        name, role = entry.name, entry.role
        if name not in node:
            continue
        if entry.section is not None and isinstance(node[name], dict) and name not in done:
            _apply_rules(entry.section, node[name])
        if role.only_under is not None:
            sibling, value = role.only_under
            if as_dumped.get(sibling) != value:
                del node[name]
                continue
        legacy = role.legacy
        if legacy is not None and as_dumped[name] == legacy.value:
            if all(as_dumped.get(sibling) == value for sibling, value in legacy.when):
                node[name] = legacy.name
    for entry in _ruled(model):
        if entry.role.enters == "later" and entry.name in node and node[entry.name] == entry.default:
            del node[entry.name]


def identity_of(model: BaseModel) -> dict[str, Any]:
    """The identity of a spec (JSON values), as its fields' roles declare it."""
    cls = type(model)
    node = model.model_dump(mode="json", exclude=_exclude(cls))
    _apply_rules(cls, node)
    return node


def canonical_json(identity: dict[str, Any]) -> str:
    """An identity's one text (sorted keys, no spaces): what a point id hashes and a series key is."""
    return json.dumps(identity, sort_keys=True, separators=(",", ":"))


def id_of_text(text: str) -> str:
    """The point id of an identity's `canonical_json`: sha256 of the text, 12 hex digits."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=1024)
def _key_text(key: str) -> str:
    return encode_basestring_ascii(key) + ":"


def _value_text(value: Any) -> str:
    """`canonical_json(value)`: the identity's scalars written directly (json.dumps spells a str, an
    int, a bool and None so), anything else by json.dumps."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    return canonical_json(value)


class IdentityMemo:
    """Identities of a batch of specs that share section objects (a grid's validated points share
    their model, cluster and train sections, bench/config/validate.py): each shared section's
    identity computed once, the same values as `identity_of` (key order aside; tests/unit/test_identity_memo.py
    compares them on a grid and on every fixture record).

    Why a section's identity can be reused: the rules of `_apply_rules` read a section and nothing
    outside it (a field's `only_under` and `legacy` name its siblings), so it depends on the section
    alone. The memo holds the sections it has seen, so an id stays theirs while it lives; use one per
    batch, and change no spec while it lives (the specs of a plan are read, never changed)."""

    def __init__(self) -> None:
        self._sections: dict[int, tuple[BaseModel, dict[str, Any]]] = {}
        # id of a shared section's identity (held in _sections, so the id stays its) -> its text
        self._texts: dict[int, str] = {}

    def identity(self, model: BaseModel) -> dict[str, Any]:
        """`identity_of(model)`: the section fields' identities shared with every spec of the batch
        that has the same section object (read them, never change them)."""
        cls = type(model)
        shared = {
            e.name: value
            for e in _entries(cls)
            if e.section is not None and e.role.enters != "excluded"
            and type(value := getattr(model, e.name)) is e.section
        }  # fmt: skip
        # The rest is dumped by pydantic, the shared sections left out: a few plain values, cheap.
        node = model.model_dump(mode="json", exclude={**_exclude(cls), **dict.fromkeys(shared, True)})
        for name, section in shared.items():
            node[name] = self._section(section)
        _apply_rules(cls, node, frozenset(shared))
        return node

    def canonical_json(self, identity: dict[str, Any]) -> str:
        """`canonical_json(identity)` of an identity the memo gave, or of a copy of its top level (a
        series key): the shared sections' texts written once. The same text: json.dumps with sorted
        keys writes a dict as its sorted `"key":value` pairs, each value's text the value's own."""
        texts = self._texts
        parts = []
        for key in sorted(identity):
            value = identity[key]
            text = texts.get(id(value)) if type(value) is dict else None
            parts.append(_key_text(key) + (_value_text(value) if text is None else text))
        return "{" + ",".join(parts) + "}"

    def _section(self, section: BaseModel) -> dict[str, Any]:
        entry = self._sections.get(id(section))
        if entry is None:
            entry = self._sections[id(section)] = (section, identity_of(section))
            self._texts[id(entry[1])] = canonical_json(entry[1])
        return entry[1]
