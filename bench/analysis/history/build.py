"""A store's records -> the History `fsdp-bench history` shows: load every stored measurement and
preflight, build the metric's series (plus the scaling efficiency beside tokens/s), keep the series
a filter names, analyse them and list the cluster's measured links.

Bad input is a ConfigError naming the flag (a store without a readable record, no series for the
metric, a filter that matches nothing), raised before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench.analysis.check.numerics import LOSS_RTOL
from bench.analysis.history.analyse import DETECT_HERE, DetectEach, History, analyse
from bench.analysis.history.detect import detector_name
from bench.analysis.history.links import link_rows
from bench.analysis.history.power import DEFAULT_TARGET_SHIFT
from bench.analysis.history.series import Series, history_series, run_time
from bench.analysis.records import RecordProblem
from bench.analysis.slow_hosts import slow_hosts
from bench.analysis.store.location import masked
from bench.config.problems import ConfigError

# How many series names a filter that matches nothing lists.
NAMED_SERIES = 10


@dataclass(frozen=True)
class HistoryQuery:
    """What to follow: the store, the metric, runs since when, which series, the gate's window and
    the numerics guard's settings (the history command's flags)."""

    store: str | Path  # a path or a database URL (bench/analysis/store/location.py)
    metric: str = "tokens_per_s"
    since: str | None = None  # a date or ISO 8601 time, as given (parse_since)
    series: str | None = None
    window: int | None = None
    numerics: bool = True
    loss_rtol: float = LOSS_RTOL
    target_shift: float = DEFAULT_TARGET_SHIFT  # a fraction: 0.1 for --target-shift 10%
    fail_on_ungated: bool = False


@dataclass
class StoredHistory:
    history: History
    problems: list[RecordProblem] = field(default_factory=list)  # stored rows that no longer read


def parse_since(text: str) -> datetime:
    """A date or ISO 8601 time (UTC unless it names its zone); ConfigError with the accepted forms."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError([f"--since {text!r}: not a date; use YYYY-MM-DD or ISO 8601 (2026-05-01T02:00)"]) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def stored_history(query: HistoryQuery, detect_many: DetectEach = DETECT_HERE) -> StoredHistory:
    """The History of every series the query selects in its store (ConfigError on bad input);
    `detect_many` finds the change points (analyse)."""
    from bench.analysis.store import StoreError, open_existing

    since = parse_since(query.since) if query.since else None
    try:
        opened = open_existing(query.store)
    except StoreError as exc:
        raise ConfigError([f"--store: {exc}"]) from None
    records, problems = opened.records(latest_only=False)
    preflights, preflight_problems = opened.preflights()
    if not records:
        raise ConfigError([f"--store: {opened.name} holds no readable record; add results with `fsdp-bench store add`"])
    history = analyse(
        select_series(records, query, since), metric=query.metric, window=query.window, numerics=query.numerics,
        loss_rtol=query.loss_rtol, detector=detector_name(), detect_many=detect_many,
        target_shift=query.target_shift, fail_on_ungated=query.fail_on_ungated,
    )  # fmt: skip
    history.links = link_rows(preflights, since)
    recent = [r for r in records if since is None or ((t := run_time(r)) is not None and t >= since)]
    history.slow_hosts = [t.line() for t in slow_hosts(recent, preflights)]
    return StoredHistory(history, problems + preflight_problems)


def select_series(records: list, query: HistoryQuery, since: datetime | None) -> list[Series]:
    """The metric's series since `since` (tokens/s brings the efficiency series along), those the
    filter names: a label containing it (case-insensitive) or an id starting with it."""
    series = history_series(records, query.metric, since)
    if not series:
        when = f" since {query.since}" if query.since else ""
        raise ConfigError([f"no ok run{when} in {masked(query.store)} measured {query.metric}"])
    if not query.series:
        return series
    wanted = query.series.lower()
    chosen = [s for s in series if wanted in s.label.lower() or s.key.startswith(wanted)]
    if not chosen:
        names = "; ".join(s.label for s in series[:NAMED_SERIES]) + ("; ..." if len(series) > NAMED_SERIES else "")
        raise ConfigError([f"--series {query.series!r}: matches no series; series: {names}"])
    return chosen
