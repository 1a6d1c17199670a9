"""Which operations grew at a change point: the profiled runs' operation summaries
(`metrics.step_breakdown.ops`, profile.enabled) before and after it, compared.

Each side is the median over its runs that profiled, per operation, of its calls and self time per step
(over the runs whose summary holds it: a summary keeps each run's own top operations, so one missing
there is unknown, not absent); only operations both sides know are compared.
An operation grew when it is called more often per step, or its self time per step rose by more than
GROWTH_FLOOR of the step (and more than GROWTH_SHARE of its own time): profiled steps are few, and a
host operation's time wobbles run to run (on a shared machine, a night whose steps sleep sees its
operations' self times rise with no change to them: docs/history.md). A sleep (`debug.slow_fraction`) is no operation: when none
grew, the line gives the step's idle time per step before and after instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.schema.record import RunResult

GROWTH_FLOOR = 0.10  # of the step time before
GROWTH_SHARE = 0.50  # of the operation's own self time before
SHOWN = 5
# The step timer's barriers are the wait for the slowest rank: idle in the step's split, never an
# operation that grew (a sleep on one rank lengthens the other's barrier).
BARRIERS = ("gloo:barrier", "c10d::barrier")


def _side(records: Sequence[RunResult]) -> tuple[dict[str, tuple[float, float]], float | None, float | None] | None:
    """({op: (calls, self s) per step}, step s, idle s) over the records that profiled; None: none did."""
    parts = [b for r in records if (b := r.metrics.step_breakdown) is not None and b.ops]
    if not parts:
        return None
    names = {name for b in parts for name in b.ops}
    # A run's summary keeps its own top operations: one it left out is unknown there, not absent.
    ops = {
        name: tuple(statistics.median(b.ops[name][i] for b in parts if name in b.ops) for i in (0, 1)) for name in names
    }
    steps = [b.step_s for b in parts if b.step_s is not None]
    idles = [b.idle_s for b in parts if b.idle_s is not None]
    return (
        ops,
        statistics.median(steps) if steps else None,
        statistics.median(idles) if idles else None,
    )


def grown_ops(before: Sequence[RunResult], after: Sequence[RunResult]) -> str | None:
    """ "operations that grew: aten::mm 45 -> 53 calls/step, self +1.20 ms/step; ..." or "no operation
    grew; idle per step +150 ms (...)"; None where a side has no profiled run."""
    old, new = _side(before), _side(after)
    if old is None or new is None:
        return None
    (old_ops, old_step, old_idle), (new_ops, _, new_idle) = old, new
    floor = GROWTH_FLOOR * (old_step or 0.0)
    grown = []
    for name in sorted((set(old_ops) & set(new_ops)) - set(BARRIERS)):
        calls0, self0 = old_ops[name]
        calls1, self1 = new_ops[name]
        more_calls = calls1 - calls0 >= 1
        slower = self1 - self0 > max(floor, GROWTH_SHARE * self0)
        if more_calls or slower:
            grown.append((self1 - self0, calls1 - calls0, name, calls0, calls1))
    if grown:
        grown.sort(key=lambda g: (-g[0], -g[1], g[2]))
        shown = [
            f"{name} {calls0:g} -> {calls1:g} calls/step, self {delta * 1e3:+.2f} ms/step"
            for delta, _, name, calls0, calls1 in grown[:SHOWN]
        ]
        more = f" (and {len(grown) - SHOWN} more)" if len(grown) > SHOWN else ""
        return "operations that grew: " + "; ".join(shown) + more
    if old_idle is None or new_idle is None:
        return "no operation grew"
    return (
        f"no operation grew; idle per step {(new_idle - old_idle) * 1e3:+.0f} ms "
        f"({old_idle * 1e3:.0f} -> {new_idle * 1e3:.0f} ms)"
    )
