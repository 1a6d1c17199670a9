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
from operator import itemgetter
from typing import Any, Literal

from bench.schema.units import human_bytes

Better = Literal["higher", "lower", "equal"]  # equal: a workload counter; any change is a different workload
Kind = Literal["timing", "counter"]
Per = Literal["step", "run"]
# How the record holds the value over ranks: the slowest (step time: each step is as slow as its
# slowest rank), the largest rank's (peak memory), the mean over devices and samples, the sum over
# devices or hosts, the whole world's (tokens/s), one rank's count that every rank shares, or the
# slowest rank's time of a collective operation (a checkpoint save).
RankPool = Literal["max", "mean", "sum", "world", "per rank", "slowest rank"]
# How repeats of a point (sweep.repeats) pool: the pooled median of every run's timed steps (the
# statistics engine's center), the median of the runs' values, the largest, or they must be equal.
RepeatPool = Literal["pooled median", "median", "max", "equal"]
# Where a metric is shown: the report's frame (its tables, results.csv, store export), a column of
# the results store, `check` (compared against a baseline), the console's point summary and the
# sweep's end table, the GPU check's table (scripts/gpu_check_table.py).
View = Literal["frame", "store", "check", "console", "sweep", "gpu"]
# How a list met on the path is reduced (applied in order): the median of the values that are
# numbers, the count of items, the last item, the sum.
Reduce = Literal["median", "count", "last", "sum"]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Flag:
    """A threshold a flag compares with, and what crossing it means (the pages quote both)."""

    value: float
    meaning: str


@dataclass(frozen=True)
class Metric:
    """One metric: see the module docstring. `path` None: computed from records by the report's
    aggregation (scaling efficiency), not stored in one."""

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
    views: frozenset[View] = frozenset()
    # Counters only: the device types on which the record's value is reproducible for a fixed spec and
    # software stack (peak memory: the CUDA caching allocator's peak; a CPU's peak RSS is not).
    exact_on: tuple[str, ...] = ("cpu", "cuda")
    # Named thresholds of the flags this metric raises (fractions unless the name says otherwise).
    flags: Mapping[str, Flag] = field(default_factory=dict, hash=False, compare=False)
    store_type: Literal["REAL", "INTEGER"] = "REAL"

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
    `metrics.telemetry`, ...), and a model's fields are read from its instance dict, fetched once
    per model: a pydantic model's attribute access (its `__getattr__` hook) costs several times a
    dict lookup, and a 10,000-record frame reads a million values."""

    def __init__(self, records: Iterable[Any]) -> None:
        self._read: dict[str, list[Any]] = {"": list(records)}
        self._dicts: dict[str, list[dict]] = {}

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
        """Read these paths, the fields of one parent in one pass over its models: each model's
        fields are fetched while it is in the cache, once instead of once per field (a record's
        objects lie apart in memory, and reaching each is most of reading a value)."""
        wanted: dict[str, list[str]] = {}
        for path in paths:
            if path not in self._read:
                head, _, name = path.rpartition(".")
                wanted.setdefault(head, []).append(name)
        if heads := [head for head in wanted if head and head not in self._read]:
            self.read_all(heads)
        for head, names in wanted.items():
            names = list(dict.fromkeys(names))
            values, fields = self._read[head], self._fields(head)
            if len(names) > 1 and values:
                try:
                    columns = zip(*map(itemgetter(*names), fields), strict=True)
                except KeyError:  # some value lacks one: field by field
                    columns = None
                else:
                    for name, column in zip(names, columns, strict=True):
                        self._read[f"{head}.{name}" if head else name] = list(column)
                    continue
            for name in names:
                self._read[f"{head}.{name}" if head else name] = _part(values, fields, name)

    def _fields(self, path: str) -> list[dict]:
        """The instance dict of each value at `path` (a dict's own self; {} for anything else)."""
        dicts = self._dicts.get(path)
        if dicts is None:
            dicts = self._dicts[path] = [
                value if isinstance(value, dict) else getattr(value, "__dict__", _NO_FIELDS) for value in self(path)
            ]
        return dicts


_NO_FIELDS: dict[str, Any] = {}
_NUMBERS = frozenset((int, float, type(None)))


def _part(values: list[Any], fields: list[dict], name: str) -> list[Any]:
    """Each value's `name` (a field, an attribute, or a dict's key); None stays None; a list maps over its items."""
    try:
        return list(map(itemgetter(name), fields))  # every value holds it: one pass of lookups
    except KeyError:
        pass
    if values.count(None) == len(values):
        return values
    return [
        found[name] if name in found else None if value is None else _item(value, name)
        for value, found in zip(values, fields)
    ]


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

_REPORT = frozenset({"frame"})


def _m(name: str, path: str | None, unit: str, better: Better, kind: Kind, per: Per, label: str,
       ranks: RankPool | None, repeats: RepeatPool, description: str, views: Iterable[View] = _REPORT,
       **options: Any) -> Metric:  # fmt: skip
    return Metric(name, path, unit, better, kind, per, label, ranks, repeats, description, views=frozenset(views),
                  **options)  # fmt: skip


_GIB = Display(".2f", "GiB", 1 / 2**30)
_PCT = Display(".1f", "%", 100.0)
_CKPT = "checkpoint"

CATALOGUE: tuple[Metric, ...] = (
    # Throughput and step time: every timing of a run derives from its timed step times.
    _m("tokens_per_s", "metrics.tokens_per_s", "tokens/s", "higher", "timing", "step", "tokens/s", "world",
       "pooled median", "tokens per step over the median step time, all ranks together",
       {"frame", "store", "check", "console", "sweep", "gpu"}, fmt=",.1f", display=Display(",.0f"),
       group="throughput"),
    _m("tokens_per_s_per_device", "metrics.tokens_per_s_per_device", "tokens/s", "higher", "timing", "step",
       "per device", "world", "pooled median", "tokens/s over the world size", {"frame", "store", "console"},
       fmt=",.1f", display=Display(",.0f"), group="throughput"),
    _m("step_time_s", "metrics.step_time_s.median", "s", "lower", "timing", "step", "median step time", "max",
       "pooled median", "median of the timed steps; each step is as long as its slowest rank's",
       {"frame", "check", "console", "gpu"}, column="step_time_median_s", display=Display(".1f", "ms", 1e3),
       title="step median", group="step time"),
    _m("step_time_p10_s", "metrics.step_time_s.p10", "s", "lower", "timing", "step", "p10", "max", "pooled median",
       "10th percentile of the timed steps", {"frame", "console"}, display=Display(".1f", "ms", 1e3),
       group="step time"),
    _m("step_time_p90_s", "metrics.step_time_s.p90", "s", "lower", "timing", "step", "p90", "max", "pooled median",
       "90th percentile of the timed steps", {"frame", "console"}, display=Display(".1f", "ms", 1e3),
       group="step time"),
    _m("step_time_cv", "metrics.step_time_s.cv", "1", "lower", "timing", "step", "cv", "max", "median",
       "coefficient of variation of the timed steps (standard deviation over mean)", {"frame", "console"},
       display=Display(".3f"), group="step time"),
    _m("mfu", "metrics.mfu", "fraction", "higher", "timing", "step", "MFU", "world", "pooled median",
       "model FLOPs utilization: the model's FLOPs per token x tokens/s over the devices' peak; null without a "
       "published peak (CPUs)", {"frame", "store", "check", "console", "gpu"}, display=_PCT, group="compute"),
    _m("hfu", "metrics.hfu", "fraction", "higher", "timing", "step", "HFU", "world", "pooled median",
       "hardware FLOPs utilization: MFU with activation recomputation counted", {"frame", "console", "gpu"},
       display=_PCT, group="compute"),
    _m("tflops_per_device", "metrics.tflops_per_device", "TFLOP/s", "higher", "timing", "step", "achieved",
       "world", "pooled median", "achieved model TFLOP/s per device", {"frame", "console"},
       display=Display(".3f", "TFLOP/s per device"), group="compute"),
    # Communication counted per step (the last warm-up step), bytes per rank.
    *(
        _m(f"comm_bytes_per_step.{op}", f"metrics.comm_bytes_per_step.{op}", "B", "lower", "counter", "step",
           op.replace("_", "-"), "per rank", "equal", f"{op.replace('_', '-')} bytes one rank moves per step",
           {"frame", "check", "console"}, column=f"comm_{op}_bytes", fmt=",.0f", display=Display(unit="bytes"),
           group="comm per step", store_type="INTEGER")
        for op in ("all_gather", "reduce_scatter", "all_reduce")
    ),
    # The workload: what is measured; a change either way is another workload.
    _m("params", "model_info.params", "parameters", "equal", "counter", "run", "parameters", None, "equal",
       "the model's parameter count (the report's frame has it among the workload's columns)", {"check"},
       fmt=",.0f", group="workload", store_type="INTEGER"),
    _m("flops_per_token", "metrics.flops_per_token", "FLOP/token", "equal", "counter", "run", "FLOPs per token",
       None, "equal", "model FLOPs per token (bench/schema/flops.py)", {"check"}, fmt=",.0f", group="workload"),
    _m("peak_mem_bytes", "metrics.peak_mem_bytes.max", "B", "lower", "counter", "step", "peak memory", "max", "max",
       "the allocator's peak allocated bytes (GPU) or the process's peak resident set size (CPU), of the largest "
       "rank", {"frame", "store", "check", "console", "gpu"}, fmt=",.0f", display=_GIB, title="peak alloc",
       group="memory", exact_on=("cuda",), store_type="INTEGER"),
    _m("peak_reserved_bytes", "metrics.peak_mem_bytes.reserved_max", "B", "lower", "counter", "step",
       "peak reserved", "max", "max", "the CUDA caching allocator's peak reserved bytes, of the largest rank (GPU "
       "only)", {"console", "gpu"}, fmt=",.0f", display=_GIB, title="peak reserved", group="memory",
       exact_on=("cuda",)),
    _m("loss_first", "metrics.loss_first", "nats", "lower", "timing", "run", "first loss", None, "median",
       "the first step's loss (the numerics guard compares whole curves)", {"frame", "console"},
       display=Display(".4f"), group="loss"),
    _m("loss_last", "metrics.loss_last", "nats", "lower", "timing", "run", "last loss", None, "median",
       "the last step's loss", {"frame", "console"}, display=Display(".4f"), group="loss"),
    # Run-level telemetry (docs/telemetry.md): one value per run.
    _m("energy_per_token", "metrics.telemetry.energy_per_token_j", "J/token", "lower", "timing", "run",
       "energy per token", "sum", "median",
       "the GPUs' board energy (CPU clusters: the hosts' RAPL package energy) over the timed window, divided by "
       "its tokens", {"frame", "check", "console", "gpu"}, column="energy_per_token_j",
       display=Display(".4g", "J/token"), title="energy", group="telemetry"),
    _m("utilization", "metrics.telemetry.util_pct", "%", "higher", "timing", "run", "utilization", "mean", "median",
       "device utilization over devices and samples (GPU: NVML's share of time a kernel ran; CPU: the rank's "
       "process CPU time over its threads)", {"frame", "check", "console", "gpu"}, column="util_pct",
       display=Display(".0f", "%"), title="util", group="telemetry",
       flags={"idle_util_pct": Flag(10.0, "a utilization sample below this many percent counts as idle"),
              "idle_share": Flag(0.5, "a device idle in more than this share of its samples is mostly idle: "
                                      "the point is flagged")}),
    _m("power_per_device", "metrics.telemetry.avg_power_w_per_device", "W", "lower", "timing", "run",
       "power per device", "mean", "median",
       "GPU board power: each device's energy counter over its span, averaged over devices; null on CPU (RAPL "
       "measures a host's packages, shared by its ranks)", {"frame", "console", "gpu"}, column="avg_power_w",
       display=Display(",.0f", "W/device"), title="power", group="telemetry"),
    _m("throttle_fraction", "metrics.telemetry.throttle_fraction", "fraction", "lower", "timing", "run",
       "throttled", "mean", "median", "share of the GPU samples with a clocks event reason that slows a busy GPU "
       "(power cap, thermal, hardware slowdown)", {"frame", "console"}, display=Display(".0f", "% of samples", 100.0),
       group="telemetry",
       flags={"throttled": Flag(0.05, "throttled in at least this share of samples: the point is flagged (below it, "
                                      "a few samples at a clock transition)")}),
    _m("idle_devices", "metrics.telemetry.idle_devices", "devices", "lower", "timing", "run", "idle devices", "sum",
       "median", "devices below the idle utilization in more than the idle share of their samples (utilization's "
       "flags)", {"frame", "console"}, display=Display("d"), group="telemetry",
       store_type="INTEGER"),
    # DCP checkpoints (docs/checkpointing.md): each save's times are its slowest rank's.
    _m("ckpt_saves", "metrics.checkpoint.saves", "saves", "equal", "counter", "run", "saves", None, "equal",
       "checkpoint saves in the run", {"frame", "console"}, reduce=("count",), display=Display("d"), group=_CKPT,
       store_type="INTEGER"),
    _m("ckpt_state_bytes", "metrics.checkpoint.saves.state_bytes_per_rank", "B", "equal", "counter", "run",
       "state", "sum", "equal", "tensor bytes of the last save, all ranks together", _REPORT,
       reduce=("last", "sum"), group=_CKPT, store_type="INTEGER"),
    _m("ckpt_bytes", "metrics.checkpoint.saves.bytes", "B", "lower", "counter", "run", "size", "sum", "equal",
       "file bytes of the last save, all ranks together, metadata included", {"frame", "console"},
       reduce=("last",), display=Display(unit="bytes"), group=_CKPT, store_type="INTEGER"),
    _m("ckpt_blocked_s", "metrics.checkpoint.saves.blocked_s", "s", "lower", "timing", "run", "blocked",
       "slowest rank", "median", "median over saves of the time training waited (sync: the whole save; async: "
       "the previous save in flight plus staging)", {"frame", "console"}, reduce=("median",),
       display=Display(".3f", "s"), group=_CKPT),
    _m("ckpt_durable_s", "metrics.checkpoint.saves.durable_s", "s", "lower", "timing", "run", "durable",
       "slowest rank", "median", "median over saves of the time until every file and the metadata were written",
       {"frame", "console"}, reduce=("median",), display=Display(".3f", "s"), group=_CKPT),
    _m("ckpt_write_bytes_per_s", "metrics.checkpoint.write_bytes_per_s", "B/s", "higher", "timing", "run",
       "write", "sum", "median", "aggregate write bandwidth: the median over the saves with durable_s > 0 of "
       "bytes / durable_s, null when there is none; stored by the ranks (bench.schema.checkpoint.write_bandwidth), "
       "computed by the migration for older records", {"frame", "console"}, display=Display(unit="bytes/s"),
       group=_CKPT),
    _m("ckpt_load_s", "metrics.checkpoint.load.load_s", "s", "lower", "timing", "run", "load", "slowest rank",
       "median", "reading the latest checkpoint back after the timed window", {"frame", "console"},
       display=Display(".3f", "s"), group=_CKPT),
    _m("ckpt_read_bytes_per_s", "metrics.checkpoint.load.read_bytes_per_s", "B/s", "higher", "timing", "run",
       "read", "sum", "median", "aggregate read bandwidth of that load: bytes / load_s; null when load_s is 0",
       {"frame", "console"}, display=Display(unit="bytes/s"), group=_CKPT),
    _m("ckpt_goodput", "metrics.checkpoint.goodput", "fraction", "higher", "timing", "run", "goodput", "world",
       "median", "tokens/s over the timed window, saves included, over tokens/s from the step-time median",
       {"frame", "console"}, display=_PCT, group=_CKPT),
    _m("ckpt_blocked_fraction", "metrics.checkpoint.blocked_fraction", "fraction", "lower", "timing", "run",
       "blocked share", "slowest rank", "median",
       "(blocked_s + bookkeeping_s) / the timed window: what the saves took from it",
       {"frame", "console"}, display=_PCT, group=_CKPT),
    # Numerics of the run.
    _m("scaler_skipped_steps", "metrics.scaler_skipped_steps", "steps", "lower", "counter", "run", "skipped steps",
       "per rank", "max", "timed steps whose optimizer step the fp16 gradient scaler skipped because gradients "
       "had inf/NaN (it then backs its scale off); null without a scaler", {"frame", "console", "gpu"},
       display=Display("d"), title="scaler skips", group="numerics", store_type="INTEGER"),
    # Computed by the report's aggregation (bench.analysis.stats.scaling_efficiency), not stored in a record.
    _m("scaling_efficiency", None, "fraction", "higher", "timing", "run", "efficiency", "world", "pooled median",
       "(tokens/s at N / tokens/s at the series' smallest node count) / (N / that count)", {"sweep"},
       display=Display(".0f", "%", 100.0), title="eff", group="scaling",
       flags={"below_prediction_points": Flag(10.0, "more than this many percentage points below the planner's "
                                                    "prediction: flagged (beyond a healthy cluster's run-to-run noise)"),
              "comm_bound_share": Flag(0.2, "a flagged point whose predicted communication is at least this share "
                                            "of the predicted step names communication as the likely cause, "
                                            "compute otherwise")}),
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
