"""The scaling-series keys of many records at once: bench.analysis.stats.scaling_key's, each
distinct key written once.

A point's weak key is its identity without what scales (nodes, world size) and its repeat index;
its strong key is that without the per-device batch (micro-batch, accumulation) and with the
global batch instead. Points that differ only in those fields share a key, so 10,000 records have
the keys of a few hundred configurations. The records are grouped by the values of their
identity's other fields (read as columns: bench/schema/identity.py's declarations say which), and
each group's key is scaling_key's of one member's identity (an `IdentityMemo`'s, so the sections'
texts are written once): the same texts as scaling_key of every record's own identity.

Why one member's key is every member's: a point's identity is a function of its spec's fields that
enter it (their values, and a section's rules read only that section), so two points whose fields
agree but for the dropped ones have identities that agree but for them, and scaling_key drops them
(the strong key reads the node count, which each group of strong keys shares through the global
batch). A field that a rule of its section reads (`only_under`, `Legacy.when`) is never dropped.
The identities are those of the configurations without their batch (one per group), each weak
group's the same with its train section's micro-batch and accumulation: fields that enter the
identity as their plain values (else they stay among the grouped fields).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from bench.analysis.stats import scaling_key
from bench.schema.identity import FieldPath, IdentityMemo, role_of
from bench.schema.metrics import PathReader
from bench.schema.spec import RunSpec

# What each key leaves out (stats.scaling_key): what scales and the repeat index; the strong key
# also the per-device batch.
WEAK_DROPPED: tuple[FieldPath, ...] = (("nodes",), ("world_size",), ("repeat",))
BATCH: tuple[FieldPath, ...] = (("train", "micro_batch"), ("train", "grad_accum"))


def _fields(model: type[BaseModel], prefix: FieldPath = ()) -> Iterator[tuple[FieldPath, bool]]:
    """(path, is a section) of every field that enters the identity, sections before their fields."""
    for name, field in model.model_fields.items():
        role = role_of(field)
        if role is None or role.enters == "excluded":
            continue
        annotation = field.annotation
        section = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        yield (*prefix, name), section
        if section:
            yield from _fields(annotation, (*prefix, name))


def _read_by_rules(model: type[BaseModel], prefix: FieldPath = ()) -> set[FieldPath]:
    """Fields some rule of their section reads (a knob's `only_under` mode, a legacy name's siblings)."""
    read: set[FieldPath] = set()
    for field in model.model_fields.values():
        role = role_of(field)
        if role is None or role.enters == "excluded":
            continue
        if role.only_under is not None:
            read.add((*prefix, role.only_under[0]))
        if role.legacy is not None:
            read.update((*prefix, sibling) for sibling, _ in role.legacy.when)
    for path, section in _fields(model, prefix):
        if section and len(path) == len(prefix) + 1:
            read |= _read_by_rules(model.model_fields[path[-1]].annotation, path)
    return read


def _plain(path: FieldPath) -> bool:
    """Whether a field enters the identity as its value, whatever its siblings (no rule of its own)."""
    model: Any = RunSpec
    for name in path[:-1]:
        model = model.model_fields[name].annotation
    role = role_of(model.model_fields[path[-1]])
    return role is not None and role.enters == "in" and role.only_under is None and role.legacy is None


_FIELDS = tuple(_fields(RunSpec))
_RULES_READ = _read_by_rules(RunSpec)
# The fields every key keeps (sections by their type: a section that is None is not one whose fields are).
_KEPT = tuple(
    (path, section)
    for path, section in _FIELDS
    if path not in {*WEAK_DROPPED, *BATCH} or path in _RULES_READ or (path in BATCH and not _plain(path))
)
# The per-device batch as the weak keys group it: fields that enter the identity as their values and
# that no rule reads, so a configuration's identity at another batch is its identity with these values.
_BATCH = tuple(path for path in BATCH if path not in _RULES_READ and _plain(path))
# Every path scaling_keys reads (a caller's PathReader can read them with its own, in one pass per model).
PATHS = (
    *(".".join(("spec", *path)) for path, _ in _KEPT), *(".".join(("spec", *path)) for path in _BATCH),
    "spec.nodes", "spec.gpus_per_node", "spec.train.micro_batch", "spec.train.grad_accum",
)  # fmt: skip


def scaling_keys(records: Sequence[Any], read: PathReader | None = None) -> tuple[list[str], list[str]]:
    """(weak keys, strong keys) of the records (RunResults): scaling_key(record.spec.identity(), mode)
    of each. `read`: a PathReader of these records, to share the columns it has read."""
    read = read or PathReader(records)
    read.read_all(PATHS)
    kept = _group_ids([_column(read, path, section) for path, section in _KEPT])
    batch_raw = [read(".".join(("spec", *path))) for path in _BATCH]
    batch = [_hashable(values) for values in batch_raw]
    nodes, gpus = read("spec.nodes"), read("spec.gpus_per_node")
    micro, accum = read("spec.train.micro_batch"), read("spec.train.grad_accum")
    weak_groups = list(zip(kept, *batch, strict=True))
    # The global batch as scaling_key computes it from the identity (the same values: plain ints).
    global_batch = [n * g * m * a for n, g, m, a in zip(nodes, gpus, micro, accum, strict=True)]
    strong_groups = list(zip(kept, global_batch, strict=True))
    memo = IdentityMemo()
    configurations: dict[int, dict[str, Any]] = {}  # one member's identity per group of the kept fields
    identities: dict[tuple, dict[str, Any]] = {}
    weak: dict[tuple, str] = {}
    for position, group in enumerate(weak_groups):
        if group not in weak:
            identity = configurations.get(kept[position])
            if identity is None:
                identity = configurations[kept[position]] = memo.identity(records[position].spec)
            # At this group's batch: the batch fields are plain values of the train section.
            batch_values = {path[-1]: column[position] for path, column in zip(_BATCH, batch_raw, strict=True)}
            identities[group] = {**identity, "train": {**identity["train"], **batch_values}} if _BATCH else identity
            weak[group] = scaling_key(identities[group], "weak", memo.canonical_json)
    strong: dict[tuple, str] = {}
    for position, group in enumerate(strong_groups):
        if group not in strong:
            # Its weak group's identity at its own node count: its identity but for the world size
            # and repeat index, which the strong key leaves out.
            identity = {**identities[weak_groups[position]], "nodes": nodes[position]}
            strong[group] = scaling_key(identity, "strong", memo.canonical_json)
    return [weak[group] for group in weak_groups], [strong[group] for group in strong_groups]


def _column(read: PathReader, path: FieldPath, section: bool) -> list[Any]:
    """A field's values as a grouping reads them: a section by its type (its fields are columns of
    their own), a value by `_hashable`."""
    values = read(".".join(("spec", *path)))
    return list(map(type, values)) if section else _hashable(values)


def _group_ids(columns: list[list[Any]]) -> list[int]:
    """One number per row: equal rows (the columns' values) share it."""
    ids: dict[tuple, int] = {}
    return [ids.setdefault(row, len(ids)) for row in zip(*columns, strict=True)]


# Values whose equality is their JSON text's: each type hashes apart from None, and within one of
# them equal values are one value (floats aside: 0.0 == -0.0, see _hashable).
_PLAIN_KINDS = ({str, type(None)}, {int, type(None)}, {bool, type(None)})


def _hashable(values: list[Any]) -> list[Any]:
    """The column as values that are equal exactly when the identity writes them alike."""
    kinds = set(map(type, values))
    if any(kinds <= plain for plain in _PLAIN_KINDS):
        return values
    if kinds <= {float, type(None)} and 0.0 not in values:  # -0.0 equals 0.0 but is written apart
        return values
    return [(type(value), repr(value)) for value in values]  # lists, models, mixed kinds: by their text
