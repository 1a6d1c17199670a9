"""Which rank never entered which collective: the verdict on a point that hung, from its ranks'
Flight Recorder dumps (fsdp_core/flight_recorder.py writes them; torch-free, standard library and
the schema only).

torch's own analyzer (`torch.distributed.flight_recorder`) imports torch and, on gloo, stops at the
empty `pg_config`; the dumps here carry the groups themselves. The reading, per process group:
only the entries a rank created after the point started count (a launch runs its points in one
process group, whose buffer also holds earlier points' collectives); the group's pending collective
is the highest `last_enqueued_collective` over its ranks, and a rank whose own is lower (or that has
none: it never issued one) never entered it. Of several groups with one pending, the collective
issued first is the cause.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.schema.hang import HangCollective, HangVerdict, MissingRank
from bench.schema.protocol_names import (
    FLIGHT_RECORDER_DIR,
    FR_BACKWARD,
    FR_BUFFER_ENV,
    FR_CLOSING_BARRIER,
    FR_FORWARD,
    FR_OPENING_BARRIER,
)


def _dumps(point_dir: Path) -> list[dict]:
    folder = Path(point_dir) / FLIGHT_RECORDER_DIR
    dumps = []
    for path in sorted(folder.glob("rank*.json")):
        try:
            dumps.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a dump cut short by SIGKILL: the others still speak
    return sorted(dumps, key=lambda d: d.get("rank", 0))


def _entries(dump: dict) -> list[dict]:
    """The rank's entries of this point (created after it started), oldest first."""
    since = dump.get("point_started_ns") or 0
    entries = (dump.get("trace") or {}).get("entries") or []
    return [e for e in entries if (e.get("time_created_ns") or 0) >= since and not e.get("is_p2p")]


def _group_of(entry: dict) -> str:
    group = entry.get("process_group") or [str(entry.get("pg_id", ""))]
    return str(group[0])


def _enqueued(dump: dict, group: str, entries: list[dict]) -> int:
    """The highest sequence number this rank issued in `group` (0: none)."""
    status = ((dump.get("trace") or {}).get("pg_status") or {}).get(group) or {}
    seqs = [int(e["collective_seq_id"]) for e in entries if _group_of(e) == group]
    try:
        return max([int(status.get("last_enqueued_collective", 0)), *seqs])
    except (TypeError, ValueError):
        return max(seqs, default=0)


def meaning(kind: str, doing: str) -> str:
    """What the harness was doing with this collective, in its own words."""
    if not doing:
        return ""
    if kind.endswith("barrier") and doing.startswith((FR_OPENING_BARRIER, FR_CLOSING_BARRIER)):
        return doing
    if kind.endswith("all_reduce") and doing.startswith(FR_BACKWARD):
        return f"FSDP's reduce-scatter (gloo records it as all_reduce) in {doing}"
    if kind.endswith(("all_gather", "_allgather_base", "all_gather_into_tensor")) and doing.startswith(
        (FR_FORWARD, FR_BACKWARD)
    ):
        return f"FSDP's all-gather in {doing}"
    return f"during {doing}"


def _collective(entry: dict, groups: dict, doing: str) -> HangCollective:
    group = _group_of(entry)
    known = groups.get(group) or {}
    kind = str(entry.get("profiling_name", "?"))
    return HangCollective(
        kind=kind,
        seq=int(entry.get("collective_seq_id", 0)),
        group=group,
        group_desc=str(known.get("desc") or (entry.get("process_group") or ["", ""])[-1]),
        group_ranks=list(known.get("ranks") or []),
        input_sizes=entry.get("input_sizes") or [],
        output_sizes=entry.get("output_sizes") or [],
        meaning=meaning(kind, doing),
    )


def _name(c: HangCollective) -> str:
    where = f": {c.meaning}" if c.meaning else ""
    return f"collective {c.seq} of {c.group_desc or c.group} ({c.kind}{where})"


def _short(c: HangCollective | None) -> str:
    return "none in this point" if c is None else f"{c.seq} {c.kind}"


def verdict(point_dir: Path) -> HangVerdict:
    """The hang verdict of a point's dumps; `unavailable` says why there is none."""
    dumps = _dumps(point_dir)
    if not dumps:
        return HangVerdict(
            unavailable=f"no Flight Recorder dump: the ranks were killed before they wrote one, or {FR_BUFFER_ENV}=0"
        )
    traced = [d for d in dumps if d.get("trace") is not None]
    if not traced:
        return HangVerdict(dumped_ranks=[d.get("rank", 0) for d in dumps], unavailable=dumps[0].get("unavailable"))
    by_rank = {int(d.get("rank", 0)): d for d in traced}
    entries = {rank: _entries(d) for rank, d in by_rank.items()}
    groups: dict[str, dict] = {}
    for d in traced:
        groups.update(d.get("groups") or {})
    world = max(int(d.get("world_size", 1)) for d in traced)
    names = set(groups) | {_group_of(e) for es in entries.values() for e in es}
    pending = []  # (time created, group, seq, ranks that entered, ranks that did not)
    for group in sorted(names):
        members = groups.get(group, {}).get("ranks") or list(range(world))
        seqs = {rank: _enqueued(by_rank[rank], group, entries[rank]) for rank in members if rank in by_rank}
        top = max(seqs.values(), default=0)
        entered = sorted(r for r, s in seqs.items() if s == top)
        behind = sorted(r for r in members if seqs.get(r, -1) < top)
        first = next(
            (e for r in entered for e in entries[r] if _group_of(e) == group and e["collective_seq_id"] == top), None
        )
        if behind and first is not None:
            pending.append((first.get("time_created_ns", 0), group, first, entered, behind))
    result = HangVerdict(dumped_ranks=sorted(by_rank))
    if not pending:
        return _nothing_pending(result, by_rank, entries, groups)
    _, group, first, entered, behind = min(pending, key=lambda p: p[0])
    result.collective = _collective(first, groups, by_rank[entered[0]].get("doing", ""))
    result.entered = entered
    for rank in behind:
        dump = by_rank.get(rank)
        own = [e for e in entries.get(rank, []) if _group_of(e) == group]
        last = _collective(own[-1], groups, "") if own else None
        doing = dump.get("doing", "") if dump else "no dump from this rank"
        result.missing.append(MissingRank(rank=rank, last=last, doing=doing))
    missing = ", ".join(str(m.rank) for m in result.missing)
    lasts = "; ".join(
        f"rank {m.rank}'s last collective: {_short(m.last)}" + (f", it was in {m.doing}" if m.doing else "")
        for m in result.missing
    )
    who = "ranks" if len(result.missing) > 1 else "rank"
    did = "ranks" if len(entered) > 1 else "rank"
    result.summary = (
        f"hung: {who} {missing} never entered {_name(result.collective)}, which {did} "
        f"{', '.join(map(str, entered))} entered; {lasts}"
    )
    return result


def _nothing_pending(result: HangVerdict, by_rank: dict, entries: dict, groups: dict) -> HangVerdict:
    """Every rank had entered every collective it issued: the hang is outside any collective."""
    parts = []
    for rank, dump in sorted(by_rank.items()):
        own = entries[rank]
        last = _collective(own[-1], groups, "") if own else None
        doing = f", it was in {dump.get('doing')}" if dump.get("doing") else ""
        parts.append(f"rank {rank}'s last collective: {_short(last)}{doing}")
    result.summary = "hung outside any collective (none was pending): " + "; ".join(parts)
    return result
