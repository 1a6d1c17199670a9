"""Hosts that keep being slow: per host, over the stored runs, how often it held the slowest rank or a
straggler.

A run counts when it finished ok over at least two hosts (on one host every rank shares it) and its
record names each rank's host (`env.rank_hosts`: older records leave it empty and are skipped). The
slowest rank is the record's `metrics.slowest_rank`; a straggler is a rank beyond the straggler rule
among the point's ranks (bench/analysis/report/digest.py `step_time_stragglers`, the preflight's
rule). Stored preflights add the stragglers they named (their host and measure), over two hosts or
more. One slow run says little; a host is listed when it held the slowest rank in more than half of
at least MIN_RUNS runs, or was a straggler in at least MIN_RUNS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.analysis.report.digest import step_time_stragglers
from bench.schema.preflight import PreflightResult
from bench.schema.record import RunResult

MIN_RUNS = 2
HOST_HEADERS = ("host", "runs over 2+ hosts", "slowest rank", "straggler", "preflight stragglers", "last run")


@dataclass
class HostTally:
    host: str
    runs: int = 0
    slowest: int = 0
    straggler: int = 0
    preflight_stragglers: int = 0
    last: str = ""  # the latest counted run's start

    @property
    def keeps_being_slow(self) -> bool:
        slowest = self.runs >= MIN_RUNS and 2 * self.slowest > self.runs
        return slowest or self.straggler + self.preflight_stragglers >= MIN_RUNS

    def line(self) -> str:
        # e.g. "node-7: slowest rank in 4 of the last 5 runs over 2+ hosts, a straggler in 3"
        parts = [f"slowest rank in {self.slowest} of the last {self.runs} runs over 2+ hosts"]
        if self.straggler:
            parts.append(f"a straggler in {self.straggler}")
        if self.preflight_stragglers:
            parts.append(f"a straggler in {self.preflight_stragglers} preflight(s)")
        return f"{self.host}: " + ", ".join(parts)

    def row(self) -> list[str]:
        counts = (self.runs, self.slowest, self.straggler, self.preflight_stragglers)
        return [self.host, *map(str, counts), self.last[:19] or "-"]


def host_tallies(records: Sequence[RunResult], preflights: Sequence[PreflightResult] = ()) -> list[HostTally]:
    """Every host of the counted runs, the slowest first (most runs as the slowest rank, then as a straggler)."""
    tallies: dict[str, HostTally] = {}

    def tally(host: str) -> HostTally:
        return tallies.setdefault(host, HostTally(host))

    for record in sorted(records, key=lambda r: r.started_at or ""):
        hosts = record.env.rank_hosts
        if record.status != "ok" or len(set(hosts)) < 2:
            continue
        for host in set(hosts):
            tally(host).runs += 1
            tally(host).last = max(tally(host).last, record.started_at or "")
        slowest = record.metrics.slowest_rank
        if slowest is not None and slowest < len(hosts):
            tally(hosts[slowest]).slowest += 1
        for host in {hosts[rank] for rank in step_time_stragglers(record) if rank < len(hosts)}:
            tally(host).straggler += 1
    for preflight in preflights:
        if preflight.status == "ok" and len({r.host for r in preflight.ranks}) >= 2:
            for host in {s.host for s in preflight.stragglers}:
                tally(host).preflight_stragglers += 1
    return sorted(tallies.values(), key=lambda t: (-t.slowest, -t.straggler - t.preflight_stragglers, t.host))


def slow_hosts(records: Sequence[RunResult], preflights: Sequence[PreflightResult] = ()) -> list[HostTally]:
    """The hosts that keep being slow (HostTally.keeps_being_slow), the slowest first."""
    return [t for t in host_tallies(records, preflights) if t.keeps_being_slow]
