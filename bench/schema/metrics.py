"""The metric catalogue: one definition per metric a point yields, read by every layer and the ranks.

Each `Metric` says what the number is and where it lives in the record (a dotted path, e.g.
`metrics.telemetry.energy_per_token_j`), its unit, which way is better, whether it is a noisy timing
(compared with the statistics engine) or a deterministic counter, whether a run gives one sample per
timed step or one per run, how the record pools it over ranks and how repeats pool, its label and
display format, the thresholds of its flags, and where it is shown (`views`). Everything that lists
metrics is generated from `CATALOGUE`: the report's frame columns and cell medians, results.csv,
the store's metric columns, the console's point summary and sweep table, `check`'s and `history`'s
metric lists, the GPU check's table, the report's flag wording and docs/metrics.md
(scripts/gen_metrics_reference.py).

A metric's `name` is what users type (`check --threshold energy_per_token:+5%`, `history --metric
tokens_per_s`) and what baselines key their values by; `column` is its column in the report's frame,
results.csv and the store where that name differs (an alias: both names find the metric).

Torch-free and dependency-free: the ranks read the flag thresholds they apply from here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Literal

from bench.schema.units import human_bytes

Better = Literal["higher", "lower", "equal"]  # equal: a workload counter; any change is a different workload
Kind = Literal["timing", "counter"]
Per = Literal["step", "run"]
# How the record holds the value over ranks: the slowest (step time: each step is as slow as its
# slowest rank), the largest rank's (peak memory), the mean over devices and samples, the sum over
# devices or hosts, the whole world's (tokens/s), one rank's count that every rank shares, the
# slowest rank's time of a collective operation (a checkpoint save), or the median over ranks (the
# profiled steps' split: each rank's median step).
RankPool = Literal["max", "mean", "median", "sum", "world", "per rank", "slowest rank"]
# How repeats of a point (sweep.repeats) pool: the pooled median of every run's timed steps (the
# statistics engine's center), the median of the runs' values, the largest, or they must be equal.
RepeatPool = Literal["pooled median", "median", "max", "equal"]
# Where a metric is shown: the report's frame (its tables, results.csv, store export), a column of
# the results store, `check` (compared against a baseline), the console's point summary and the
# sweep's end table, the GPU check's table (scripts/gpu_check_table.py), and a column of the report's
# point tables (its headline, every point) on the page and in summary.md (reports/report/tables.py).
View = Literal["frame", "store", "check", "console", "sweep", "gpu", "report"]
# How a list met on the path is reduced (applied in order): the median of the values that are
# numbers, the count of items, the last item, the sum.
Reduce = Literal["median", "count", "last", "sum"]


@dataclass(frozen=True, kw_only=True)
class Display:
    """How tables and the console show a value: times `scale`, in `unit`, with `fmt`.

    `unit` "bytes" writes sizes in binary units (1.5 GiB) and "bytes/s" rates (1.5 GiB/s); "%" is
    written against the number (12.3%), any other unit after a space."""

    fmt: str = ".4g"
    unit: str = ""
    scale: float = 1.0

    def text(self, value: float | None, missing: str = "-") -> str:
        """The value with its unit (the console, the sweep table)."""
        if not is_number(value):
            return missing
        if self.unit in ("bytes", "bytes/s"):
            return human_bytes(value) + ("/s" if self.unit == "bytes/s" else "")
        number = self.number(value)
        return f"{number}{self.unit}" if self.unit in ("", "%") else f"{number} {self.unit}"

    def number(self, value: float | None, missing: str = "-") -> str:
        """The number alone, for a column whose heading names the unit (the GPU check's table)."""
        if not is_number(value):
            return missing
        return format(value * self.scale if self.scale != 1 else value, self.fmt)  # counts keep their int


@dataclass(frozen=True, kw_only=True)
class Flag:
    """A threshold a flag compares with, and what crossing it means (the pages quote both)."""

    value: float
    meaning: str


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric: see the module docstring. `path` None: computed from records by the report's
    aggregation (scaling efficiency), not stored in one. Keyword arguments only, so that a catalogue
    entry reads without counting positions."""

    name: str
    path: str | None
    unit: str
    better: Better
    kind: Kind
    per: Per
    label: str
    ranks: RankPool | None
    repeats: RepeatPool
    description: str
    fmt: str = ".4g"  # the value in `unit`, as check's and history's tables and docs write it
    display: Display = field(default_factory=Display)  # as the console, the sweep table and the GPU table show it
    title: str = ""  # a short column heading (the sweep table, the GPU table); default: the label
    group: str = ""  # the console's point summary prints a group's metrics on one line
    column: str = ""  # the frame's, results.csv's and the store's column; default: the name
    aliases: tuple[str, ...] = ()  # older names users type that still find the metric
    reduce: tuple[Reduce, ...] = ()  # lists on the path (a checkpoint's saves) reduce to one number
    views: frozenset[View] = frozenset({"frame"})  # by default the report's frame alone
    # Counters only: the device types on which the record's value is reproducible for a fixed spec and
    # software stack (peak memory: the CUDA caching allocator's peak; a CPU's peak RSS is not).
    exact_on: tuple[str, ...] = ("cpu", "cuda")
    # Named thresholds of the flags this metric raises (fractions unless the name says otherwise).
    flags: Mapping[str, Flag] = field(default_factory=dict, hash=False, compare=False)
    store_type: Literal["REAL", "INTEGER"] = "REAL"
    # What a table says where a measured point has no value (usd_per_mtoken: "no price"); "": a dash.
    missing: str = ""

    @property
    def key(self) -> str:
        """The frame's, results.csv's and the store's column."""
        return self.column or self.name

    @property
    def heading(self) -> str:
        return self.title or self.label

    @property
    def unit_heading(self) -> str:
        """The heading with the display unit, for columns of bare numbers: `MFU %`, `peak alloc GiB`."""
        return f"{self.heading} {self.display.unit}".strip()

    @property
    def axis_label(self) -> str:
        """A plot axis's label: the label with the display unit, `MFU (%)`, `median step time (ms)`."""
        unit = self.display.unit
        return f"{self.label} ({unit})" if unit and unit not in self.label else self.label

    @property
    def field(self) -> str | None:
        """The record field that holds it (the key of its section's `missing` reasons, e.g. energy_per_token_j)."""
        return self.path.rsplit(".", 1)[-1] if self.path else None

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that finds this metric: the name, the column, the aliases."""
        return tuple(dict.fromkeys((self.name, self.key, *self.aliases)))

    def value(self, record: Any) -> float | None:
        """The metric's value in a record (a RunResult or its JSON as a dict); None where it is absent."""
        if self.path is None:
            return None
        value = record
        for name in self.path.split("."):
            value = _item(value, name)
        for step in self.reduce:
            value = _REDUCERS[step](value)
        return _number(value)

    def values_in(self, read: PathReader) -> list[float | None]:
        """The metric's value in each of the reader's records (`value`, for many records at once)."""
        if self.path is None:
            return [None] * len(read)
        values = read(self.path)
        for step in self.reduce:
            values = list(map(_REDUCERS[step], values))
        if set(map(type, values)) <= _NUMBERS:  # already numbers or None: kept as they are
            return values
        return list(map(_number, values))

    def text(self, value: float | None, missing: str = "-") -> str:
        """The value as check's and history's tables write it (in `unit`)."""
        if not is_number(value):
            return missing
        if self.kind == "counter" and not float(value).is_integer():
            return f"{value:,.6g}"
        return format(value, self.fmt)

    def flag(self, name: str) -> float:
        """The threshold of one of the metric's flags."""
        return self.flags[name].value


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


class PathReader:
    """Dotted paths (data.a.b...) read from many records at once, through models (attributes) and
    dicts alike; None stays None, and a list maps the rest of the path over its items. Each path
    is read once per reader, from its prefix's values (the metrics' paths share `metrics`,
    `metrics.telemetry`, ...), and the fields of one parent wanted together are read in one pass
    over its values (a 10,000-record frame reads about a million values)."""

    def __init__(self, records: Iterable[Any]) -> None:
        self._read: dict[str, list[Any]] = {"": list(records)}

    def __len__(self) -> int:
        return len(self._read[""])

    def __call__(self, path: str) -> list[Any]:
        """The value at `path` in each record (None where the path is absent)."""
        values = self._read.get(path)
        if values is None:
            self.read_all([path])
            values = self._read[path]
        return values

    def read_all(self, paths: Iterable[str]) -> None:
        """Read these paths, the fields of one parent in one pass over its values: one getter call
        per value gives all of them (a record's objects lie apart in memory, and reaching each is
        most of reading a value)."""
        wanted: dict[str, list[str]] = {}
        for path in paths:
            if path not in self._read:
                head, _, name = path.rpartition(".")
                wanted.setdefault(head, []).append(name)
        if heads := [head for head in wanted if head and head not in self._read]:
            self.read_all(heads)
        for head, names in wanted.items():
            names = list(dict.fromkeys(names))
            for name, column in zip(names, _columns(self._read[head], names), strict=True):
                self._read[f"{head}.{name}" if head else name] = column


_NUMBERS = frozenset((int, float, type(None)))


def _columns(values: list[Any], names: list[str]) -> list[list[Any]]:
    """Each of `names` (a field, an attribute or a dict's key) of each value, by `_item`'s rules: None
    stays None, a list maps over its items, a value that lacks the name gives None. Where the values
    that are not None are all dicts, or all objects of one class, one getter (`itemgetter`,
    `attrgetter`) reads every name of a value in one call; otherwise (lists, types mixed, a value
    that lacks a name) value by value."""
    kinds = set(map(type, values))
    some_none = type(None) in kinds
    kinds.discard(type(None))
    if not kinds:  # nothing but None: so is every name's value
        return [values] * len(names)
    if len(kinds) == 1 and (kind := kinds.pop()) is not list:
        present = [value for value in values if value is not None] if some_none else values
        try:
            rows = list(map(itemgetter(*names) if kind is dict else attrgetter(*names), present))
        except (KeyError, AttributeError):  # some value lacks a name: value by value, below
            pass
        else:
            found = [rows] if len(names) == 1 else [list(column) for column in zip(*rows, strict=True)]
            return found if present is values else [_spread(column, values) for column in found]
    return [[_item(value, name) for value in values] for name in names]


def _spread(column: list[Any], values: list[Any]) -> list[Any]:
    """A column read from the values that are not None, spread over all of them (None at a None)."""
    read = iter(column)
    return [None if value is None else next(read) for value in values]


def _number(value: Any) -> float | None:
    """A metric's value: a number as it is, anything else (a bool, a list, a text) None."""
    return None if isinstance(value, bool) or not isinstance(value, int | float) else value


def _item(value: Any, name: str) -> Any:
    """One step of a path: a model's attribute or a dict's key; None stays None; a list maps over its items."""
    if value is None:
        return None
    if isinstance(value, list):
        return [_item(item, name) for item in value]
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _median(values: Any) -> float | None:
    numbers = [v for v in values or [] if is_number(v)]
    return statistics.median(numbers) if numbers else None


def _count(values: Any) -> int | None:
    return len(values) if isinstance(values, list) else None


def _last(values: Any) -> Any:
    return values[-1] if isinstance(values, list) and values else None


def _sum(values: Any) -> float | None:
    return sum(values) if isinstance(values, list) and values and all(map(is_number, values)) else None


_REDUCERS = {"median": _median, "count": _count, "last": _last, "sum": _sum}

_GIB = Display(fmt=".2f", unit="GiB", scale=1 / 2**30)
_PCT = Display(fmt=".1f", unit="%", scale=100.0)
_CKPT = "checkpoint"
_JOB = "job"
_SPLIT = "step split"


def _job_metric(
    name: str, field: str, unit: str, better: str, label: str, description: str, display: Display | None = None
) -> Metric:
    """A number of the whole job's accounting (metrics.job): one value per run, on the console's "job" line
    and in the frame; counts (attempts, steps) are counters, the rest timings."""
    counted = unit in ("attempts", "steps")
    return Metric(
        name=name, path=f"metrics.job.{field}", unit=unit, better=better, kind="counter" if counted else "timing",
        per="run", label=label, ranks="world", repeats="max" if counted else "median", description=description,
        views=frozenset({"frame", "console"}), group=_JOB, store_type="INTEGER" if counted else "REAL",
        display=display or (Display(fmt="d") if counted else Display(fmt=".1f", unit="s")),
    )  # fmt: skip


def _split_metric(name: str, label: str, description: str, unit: str = "s", display: Display | None = None) -> Metric:
    """A part of the profiled steps' split (metrics.step_breakdown): one value per run, lower is better,
    shown on the console's "step split" line, in the frame and by check."""
    return Metric(
        name=name, path=f"metrics.step_breakdown.{name}", unit=unit, better="lower", kind="timing", per="run",
        label=label, ranks="median", repeats="median", description=description,
        views=frozenset({"frame", "check", "console"}), display=display or Display(fmt=".1f", unit="ms", scale=1e3),
        group=_SPLIT,
    )  # fmt: skip


CATALOGUE: tuple[Metric, ...] = (
    # Throughput and step time: every timing of a run derives from its timed step times.
    Metric(
        name="tokens_per_s", path="metrics.tokens_per_s", unit="tokens/s", better="higher", kind="timing", per="step",
        label="tokens/s", ranks="world", repeats="pooled median",
        description="tokens per step over the median step time, all ranks together",
        views=frozenset({"frame", "store", "check", "console", "sweep", "gpu"}), fmt=",.1f",
        display=Display(fmt=",.0f"), group="throughput",
    ),
    Metric(
        name="tokens_per_s_per_device", path="metrics.tokens_per_s_per_device", unit="tokens/s", better="higher",
        kind="timing", per="step", label="per device", ranks="world", repeats="pooled median",
        description="tokens/s over the world size", views=frozenset({"frame", "store", "console"}), fmt=",.1f",
        display=Display(fmt=",.0f"), group="throughput",
    ),
    Metric(
        name="step_time_s", path="metrics.step_time_s.median", unit="s", better="lower", kind="timing", per="step",
        label="median step time", ranks="max", repeats="pooled median",
        description="median of the timed steps; each step is as long as its slowest rank's",
        views=frozenset({"frame", "check", "console", "gpu"}), column="step_time_median_s",
        display=Display(fmt=".1f", unit="ms", scale=1e3), title="step median", group="step time",
    ),
    Metric(
        name="step_time_p10_s", path="metrics.step_time_s.p10", unit="s", better="lower", kind="timing", per="step",
        label="p10", ranks="max", repeats="pooled median", description="10th percentile of the timed steps",
        views=frozenset({"frame", "console"}), display=Display(fmt=".1f", unit="ms", scale=1e3), group="step time",
    ),
    Metric(
        name="step_time_p90_s", path="metrics.step_time_s.p90", unit="s", better="lower", kind="timing", per="step",
        label="p90", ranks="max", repeats="pooled median", description="90th percentile of the timed steps",
        views=frozenset({"frame", "console"}), display=Display(fmt=".1f", unit="ms", scale=1e3), group="step time",
    ),
    Metric(
        name="step_time_cv", path="metrics.step_time_s.cv", unit="1", better="lower", kind="timing", per="step",
        label="cv", ranks="max", repeats="median",
        description="coefficient of variation of the timed steps (standard deviation over mean)",
        views=frozenset({"frame", "console"}), display=Display(fmt=".3f"), group="step time",
    ),
    Metric(
        name="mfu", path="metrics.mfu", unit="fraction", better="higher", kind="timing", per="step", label="MFU",
        ranks="world", repeats="pooled median",
        description="model FLOPs utilization: the model's FLOPs per token x tokens/s over the devices' peak; null "
                    "without a published peak (CPUs)",
        views=frozenset({"frame", "store", "check", "console", "gpu"}), display=_PCT, group="compute",
    ),
    Metric(
        name="hfu", path="metrics.hfu", unit="fraction", better="higher", kind="timing", per="step", label="HFU",
        ranks="world", repeats="pooled median",
        description="hardware FLOPs utilization: MFU with activation recomputation counted",
        views=frozenset({"frame", "console", "gpu"}), display=_PCT, group="compute",
    ),
    Metric(
        name="tflops_per_device", path="metrics.tflops_per_device", unit="TFLOP/s", better="higher", kind="timing",
        per="step", label="achieved", ranks="world", repeats="pooled median",
        description="achieved model TFLOP/s per device", views=frozenset({"frame", "console"}),
        display=Display(fmt=".3f", unit="TFLOP/s per device"), group="compute",
    ),
    # Communication counted per step (the last warm-up step), bytes per rank.
    *(
        Metric(
            name=f"comm_bytes_per_step.{op}", path=f"metrics.comm_bytes_per_step.{op}", unit="B", better="lower",
            kind="counter", per="step", label=op.replace("_", "-"), ranks="per rank", repeats="equal",
            description=f"{op.replace('_', '-')} bytes one rank moves per step",
            views=frozenset({"frame", "check", "console"}), column=f"comm_{op}_bytes", fmt=",.0f",
            display=Display(unit="bytes"), group="comm per step", store_type="INTEGER",
        )
        for op in ("all_gather", "reduce_scatter", "all_reduce")
    ),
    # The workload: what is measured; a change either way is another workload.
    Metric(
        name="params", path="model_info.params", unit="parameters", better="equal", kind="counter", per="run",
        label="parameters", ranks=None, repeats="equal",
        description="the model's parameter count (the report's frame has it among the workload's columns)",
        views=frozenset({"check"}), fmt=",.0f", group="workload", store_type="INTEGER",
    ),
    Metric(
        name="flops_per_token", path="metrics.flops_per_token", unit="FLOP/token", better="equal", kind="counter",
        per="run", label="FLOPs per token", ranks=None, repeats="equal",
        description="model FLOPs per token (bench/schema/flops.py)", views=frozenset({"check"}), fmt=",.0f",
        group="workload",
    ),
    Metric(
        name="peak_mem_bytes", path="metrics.peak_mem_bytes.max", unit="B", better="lower", kind="counter", per="step",
        label="peak memory", ranks="max", repeats="max",
        description="the allocator's peak allocated bytes (GPU) or the process's peak resident set size (CPU), of the "
                    "largest rank",
        views=frozenset({"frame", "store", "check", "console", "gpu"}), fmt=",.0f", display=_GIB, title="peak alloc",
        group="memory", exact_on=("cuda",), store_type="INTEGER",
    ),
    Metric(
        name="peak_reserved_bytes", path="metrics.peak_mem_bytes.reserved_max", unit="B", better="lower",
        kind="counter", per="step", label="peak reserved", ranks="max", repeats="max",
        description="the CUDA caching allocator's peak reserved bytes, of the largest rank (GPU only)",
        views=frozenset({"console", "gpu"}), fmt=",.0f", display=_GIB, title="peak reserved", group="memory",
        exact_on=("cuda",),
    ),
    Metric(
        name="loss_first", path="metrics.loss_first", unit="nats", better="lower", kind="timing", per="run",
        label="first loss", ranks=None, repeats="median",
        description="the first step's loss (the numerics guard compares whole curves)",
        views=frozenset({"frame", "console"}), display=Display(fmt=".4f"), group="loss",
    ),
    Metric(
        name="loss_last", path="metrics.loss_last", unit="nats", better="lower", kind="timing", per="run",
        label="last loss", ranks=None, repeats="median", description="the last step's loss",
        views=frozenset({"frame", "console"}), display=Display(fmt=".4f"), group="loss",
    ),
    # Run-level telemetry (docs/telemetry.md): one value per run.
    Metric(
        name="energy_per_token", path="metrics.telemetry.energy_per_token_j", unit="J/token", better="lower",
        kind="timing", per="run", label="energy per token", ranks="sum", repeats="median",
        description="the GPUs' board energy (CPU clusters: the hosts' RAPL package energy) over the timed window, "
                    "divided by its tokens",
        views=frozenset({"frame", "check", "console", "gpu"}), column="energy_per_token_j",
        display=Display(fmt=".4g", unit="J/token"), title="energy", group="telemetry",
    ),
    Metric(
        name="utilization", path="metrics.telemetry.util_pct", unit="%", better="higher", kind="timing", per="run",
        label="utilization", ranks="mean", repeats="median",
        description="device utilization over devices and samples (GPU: NVML's share of time a kernel ran; CPU: the "
                    "rank's process CPU time over its threads)",
        views=frozenset({"frame", "check", "console", "gpu"}), column="util_pct", display=Display(fmt=".0f", unit="%"),
        title="util", group="telemetry",
        flags={
            "idle_util_pct": Flag(value=10.0, meaning="a utilization sample below this many percent counts as idle"),
            "idle_share": Flag(value=0.5, meaning="a device idle in more than this share of its samples is mostly "
                                                  "idle: the point is flagged"),
        },
    ),
    Metric(
        name="power_per_device", path="metrics.telemetry.avg_power_w_per_device", unit="W", better="lower",
        kind="timing", per="run", label="power per device", ranks="mean", repeats="median",
        description="GPU board power: each device's energy counter over its span, averaged over devices; null on CPU "
                    "(RAPL measures a host's packages, shared by its ranks)",
        views=frozenset({"frame", "console", "gpu"}), column="avg_power_w",
        display=Display(fmt=",.0f", unit="W/device"), title="power", group="telemetry",
    ),
    Metric(
        name="throttle_fraction", path="metrics.telemetry.throttle_fraction", unit="fraction", better="lower",
        kind="timing", per="run", label="throttled", ranks="mean", repeats="median",
        description="share of the GPU samples with a clocks event reason that slows a busy GPU (power cap, thermal, "
                    "hardware slowdown)",
        views=frozenset({"frame", "console"}), display=Display(fmt=".0f", unit="% of samples", scale=100.0),
        group="telemetry",
        flags={
            "throttled": Flag(value=0.05, meaning="throttled in at least this share of samples: the point is flagged "
                                                  "(below it, a few samples at a clock transition)"),
        },
    ),
    Metric(
        name="idle_devices", path="metrics.telemetry.idle_devices", unit="devices", better="lower", kind="timing",
        per="run", label="idle devices", ranks="sum", repeats="median",
        description="devices below the idle utilization in more than the idle share of their samples (utilization's "
                    "flags)",
        views=frozenset({"frame", "console"}), display=Display(fmt="d"), group="telemetry", store_type="INTEGER",
    ),
    # DCP checkpoints (docs/checkpointing.md): each save's times are its slowest rank's.
    Metric(
        name="ckpt_saves", path="metrics.checkpoint.saves", unit="saves", better="equal", kind="counter", per="run",
        label="saves", ranks=None, repeats="equal", description="checkpoint saves in the run",
        views=frozenset({"frame", "console"}), reduce=("count",), display=Display(fmt="d"), group=_CKPT,
        store_type="INTEGER",
    ),
    Metric(
        name="ckpt_state_bytes", path="metrics.checkpoint.saves.state_bytes_per_rank", unit="B", better="equal",
        kind="counter", per="run", label="state", ranks="sum", repeats="equal",
        description="tensor bytes of the last save, all ranks together", reduce=("last", "sum"), group=_CKPT,
        store_type="INTEGER",
    ),
    Metric(
        name="ckpt_bytes", path="metrics.checkpoint.saves.bytes", unit="B", better="lower", kind="counter", per="run",
        label="size", ranks="sum", repeats="equal",
        description="file bytes of the last save, all ranks together, metadata included",
        views=frozenset({"frame", "console"}), reduce=("last",), display=Display(unit="bytes"), group=_CKPT,
        store_type="INTEGER",
    ),
    Metric(
        name="ckpt_blocked_s", path="metrics.checkpoint.saves.blocked_s", unit="s", better="lower", kind="timing",
        per="run", label="blocked", ranks="slowest rank", repeats="median",
        description="median over saves of the time training waited (sync: the whole save; async: the previous save in "
                    "flight plus staging)",
        views=frozenset({"frame", "console"}), reduce=("median",), display=Display(fmt=".3f", unit="s"), group=_CKPT,
    ),
    Metric(
        name="ckpt_durable_s", path="metrics.checkpoint.saves.durable_s", unit="s", better="lower", kind="timing",
        per="run", label="durable", ranks="slowest rank", repeats="median",
        description="median over saves of the time until every file and the metadata were written",
        views=frozenset({"frame", "console"}), reduce=("median",), display=Display(fmt=".3f", unit="s"), group=_CKPT,
    ),
    Metric(
        name="ckpt_write_bytes_per_s", path="metrics.checkpoint.write_bytes_per_s", unit="B/s", better="higher",
        kind="timing", per="run", label="write", ranks="sum", repeats="median",
        description="aggregate write bandwidth: the median over the saves with durable_s > 0 of bytes / durable_s, "
                    "null when there is none; stored by the ranks (bench.schema.checkpoint.write_bandwidth), computed "
                    "by the migration for older records",
        views=frozenset({"frame", "console"}), display=Display(unit="bytes/s"), group=_CKPT,
    ),
    Metric(
        name="ckpt_load_s", path="metrics.checkpoint.load.load_s", unit="s", better="lower", kind="timing", per="run",
        label="load", ranks="slowest rank", repeats="median",
        description="reading the latest checkpoint back after the timed window", views=frozenset({"frame", "console"}),
        display=Display(fmt=".3f", unit="s"), group=_CKPT,
    ),
    Metric(
        name="ckpt_read_bytes_per_s", path="metrics.checkpoint.load.read_bytes_per_s", unit="B/s", better="higher",
        kind="timing", per="run", label="read", ranks="sum", repeats="median",
        description="aggregate read bandwidth of that load: bytes / load_s; null when load_s is 0",
        views=frozenset({"frame", "console"}), display=Display(unit="bytes/s"), group=_CKPT,
    ),
    Metric(
        name="ckpt_goodput", path="metrics.checkpoint.goodput", unit="fraction", better="higher", kind="timing",
        per="run", label="goodput", ranks="world", repeats="median",
        description="tokens/s over the timed window, saves included, over tokens/s from the step-time median",
        views=frozenset({"frame", "console"}), display=_PCT, group=_CKPT,
    ),
    Metric(
        name="ckpt_blocked_fraction", path="metrics.checkpoint.blocked_fraction", unit="fraction", better="lower",
        kind="timing", per="run", label="blocked share", ranks="slowest rank", repeats="median",
        description="(blocked_s + bookkeeping_s) / the timed window: what the saves took from it",
        views=frozenset({"frame", "console"}), display=_PCT, group=_CKPT,
    ),
    # Numerics of the run.
    Metric(
        name="scaler_skipped_steps", path="metrics.scaler_skipped_steps", unit="steps", better="lower", kind="counter",
        per="run", label="skipped steps", ranks="per rank", repeats="max",
        description="timed steps whose optimizer step the fp16 gradient scaler skipped because gradients had inf/NaN "
                    "(it then backs its scale off); null without a scaler",
        views=frozenset({"frame", "console", "gpu"}), display=Display(fmt="d"), title="scaler skips", group="numerics",
        store_type="INTEGER",
    ),
    # The whole job: every second of a point over all its attempts (bench/schema/job.py, docs/reliability.md).
    _job_metric("job_goodput", "job_goodput", "fraction", "higher", "job goodput",
                "productive time (the surviving steps less their start-up excess) / the whole job's wall, from the "
                "launch's resources running to the record, over every attempt", _PCT),
    _job_metric("job_wall_s", "wall_s", "s", "lower", "wall",
                "the whole job's wall: from the launch's resources running (a later point of a launch: its start) to "
                "the record, over every attempt; queueing apart"),
    _job_metric("job_startup_s", "startup_s", "s", "lower", "start-up",
                "program start-up + initialization + the first steps' excess over the steady-state median step, over "
                "every attempt (the launch's first point holds the launch's start-up)"),
    _job_metric("job_lost_s", "lost_s", "s", "lower", "lost",
                "what failures cost: the progress they undid (wasted_progress_s) and the recovery until the restarted "
                "process (recovery_s)"),
    _job_metric("job_attempts", "attempts", "attempts", "lower", "attempts",
                "attempts at the point: 1 + the restarts after failures (launcher.max_failures)"),
    _job_metric("job_steps_redone", "steps_redone", "steps", "lower", "steps redone",
                "steps that ran in an attempt a failure ended and ran again after the restart"),
    # Computed by the report's frame from the record's price (spec.cluster.usd_per_node_hour, a DESCRIBES
    # fact that may be set after the run) and its throughput (bench.analysis.planner.failures.usd_per_mtoken).
    Metric(
        name="usd_per_mtoken", path=None, unit="USD/Mtoken", better="lower", kind="timing", per="run",
        label="$/Mtoken", ranks="world", repeats="median",
        description="cluster.usd_per_node_hour x nodes over the tokens of an hour at tokens_per_s, times "
                    "job_goodput where the record has it; null without a price",
        views=frozenset({"frame", "report"}), display=Display(fmt=".3g"), missing="no price",
    ),
    # The profiled steps' split (profile.enabled; docs/engine.md "Profiled steps"): one value per run,
    # each the median over ranks of the rank's median over its profiled steps.
    _split_metric("compute_s", "compute", "a profiled step's compute: the training thread's ops outside FSDP's "
                  "ranges and the c10d calls (CPU), the non-NCCL kernels (CUDA)"),
    _split_metric("exposed_comm_s", "exposed comm", "a profiled step's communication while no compute runs (gloo "
                  "spans, NCCL kernels; a late peer's wait included)"),
    _split_metric("exposed_comm_share", "exposed share", "exposed_comm_s / the profiled step's time", unit="fraction",
                  display=_PCT),
    _split_metric("idle_s", "idle", "a profiled step less compute and exposed communication: FSDP's bookkeeping, "
                  "the step timer's closing barrier (the wait for the slowest rank), the rest"),
    # Computed by the report's aggregation (bench.analysis.stats.scaling_efficiency), not stored in a record.
    Metric(
        name="scaling_efficiency", path=None, unit="fraction", better="higher", kind="timing", per="run",
        label="efficiency", ranks="world", repeats="pooled median",
        description="(tokens/s at N / tokens/s at the series' smallest node count) / (N / that count)",
        views=frozenset({"sweep"}), display=Display(fmt=".0f", unit="%", scale=100.0), title="eff", group="scaling",
        flags={
            "below_prediction_points": Flag(value=10.0, meaning="more than this many percentage points below the "
                                                                "planner's prediction: flagged (beyond a healthy "
                                                                "cluster's run-to-run noise)"),
            "comm_bound_share": Flag(value=0.2, meaning="a flagged point whose predicted communication is at least "
                                                        "this share of the predicted step names communication as the "
                                                        "likely cause, compute otherwise"),
        },
    ),
)  # fmt: skip

BY_NAME: dict[str, Metric] = {name: metric for metric in CATALOGUE for name in metric.names}


def find(name: str) -> Metric | None:
    """The metric any of its names (name, column, alias) finds, or None."""
    return BY_NAME.get(name)


def get(name: str) -> Metric:
    return BY_NAME[name]


def shown_in(view: View) -> tuple[Metric, ...]:
    """The metrics a view shows, in catalogue order."""
    return tuple(metric for metric in CATALOGUE if view in metric.views)


def values(record: Any, view: View) -> dict[str, float | None]:
    """column -> value of every metric a view shows, for one record."""
    return {metric.key: metric.value(record) for metric in shown_in(view)}


def columns(records: Iterable[Any], view: View, read: PathReader | None = None) -> dict[str, list[float | None]]:
    """column -> the value of every metric a view shows in each record (`values`, for many records
    at once: each path read once over all of them). `read`: a PathReader of these records, to share."""
    read = read or PathReader(records)
    read.read_all(metric.path for metric in shown_in(view) if metric.path)
    return {metric.key: metric.values_in(read) for metric in shown_in(view)}
