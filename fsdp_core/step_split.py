"""A profiled step split into compute, communication (overlapped and exposed) and idle, from one rank's
exported profiler trace (Chrome-trace JSON, as torch.profiler writes it). Torch-free: the ranks run it
on the trace they just exported, the unit tests on committed traces.

Definitions, per step (docs/engine.md, "Profiled steps"):

- *step*: the harness's own range, `STEP_RANGE` (a record_function from the step timer's start to its
  stop: the time the timer measures, its closing CPU barrier in it); its thread is the training thread;
- *compute* (CPU): the union of the training thread's `aten::*` ops outside FSDP's `FSDP::*` ranges
  and the `c10d::*` calls. Not every `cpu_op`: autograd's wrappers hold FSDP's post-backward hook and
  whatever a hook waits for (a late peer's collective would count as compute);
  (CUDA) the union of the kernels that are not NCCL's, memory copies and sets left out (as HTA does);
- *communication*: (CPU) the union of `gloo:*` spans but `gloo:barrier` on the other threads, found by
  event name, never by thread name (gloo's threads are not reliably named); a span includes the wait
  for a late peer, as an NCCL kernel does; its kind comes from the c10d call on the training thread
  that issued it (gloo runs a reduce-scatter as `gloo:all_reduce`); (CUDA) NCCL's kernels,
  `ncclDevKernel_*` (NCCL >= 2.19) and `ncclKernel_*`, by the kind their name says;
- *overlapped*: communication while compute runs; *exposed*: the rest of it;
- *idle*: step - compute - exposed, with two parts named on CPU: `fsdp_s`, FSDP's own bookkeeping
  (time in `FSDP::*` ranges with neither compute nor a collective running) and `barrier_s`, the step
  timer's closing barrier (`c10d::barrier`/`gloo:barrier`: the wait for the slowest rank).

So compute + exposed + idle = step by construction. On CUDA a step's time is its kernels' span on the
device (the kernels its CPU range launched, matched by correlation id), FSDP's bookkeeping and the
barrier are host-side and not split (`missing` says so).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable

from bench.schema.breakdown import PARTS
from bench.schema.options import Collective

RANGE_PREFIX = "fsdp_bench::"  # the harness's own record_function ranges (steps; memory history's phases)
STEP_RANGE = f"{RANGE_PREFIX}step"  # the harness's range around each profiled step (fsdp_core/profiling.py)
PROFILER_STEP = "ProfilerStep#"  # torch.profiler's own step ranges (a trace the harness did not make)
KINDS: tuple[str, ...] = Collective.__args__
NCCL_KERNELS = ("ncclDevKernel_", "ncclKernel_")

Interval = tuple[float, float]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of intervals, as sorted disjoint intervals."""
    out: list[list[float]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def length(intervals: list[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def intersect(first: list[Interval], second: list[Interval]) -> list[Interval]:
    """The intersection of two unions (each sorted and disjoint)."""
    out, i, j = [], 0, 0
    while i < len(first) and j < len(second):
        start, end = max(first[i][0], second[j][0]), min(first[i][1], second[j][1])
        if end > start:
            out.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(first: list[Interval], second: list[Interval]) -> list[Interval]:
    """`first` less `second` (both sorted and disjoint)."""
    out, j = [], 0
    for start, end in first:
        cursor = start
        while j < len(second) and second[j][1] <= cursor:
            j += 1
        k = j
        while k < len(second) and second[k][0] < end:
            if second[k][0] > cursor:
                out.append((cursor, second[k][0]))
            cursor = max(cursor, second[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def clipped(intervals: list[Interval], window: Interval) -> list[Interval]:
    return intersect(intervals, [window])


def _span(event: dict) -> Interval:
    start = float(event["ts"])
    return start, start + float(event.get("dur", 0.0))


def collective_kind(name: str) -> str:
    """all_gather / reduce_scatter / all_reduce / other, from a c10d call's or an NCCL kernel's name."""
    flat = name.lower().replace("_", "")
    for kind in KINDS:
        if kind.replace("_", "") in flat:
            return kind
    return "other"


def step_ranges(events: list[dict], step_name: str = STEP_RANGE) -> list[dict]:
    """The trace's step ranges in time order: the harness's own, or (for a trace it did not make)
    the profiler's `ProfilerStep#N`."""
    if step_name == PROFILER_STEP:
        found = [e for e in events if e.get("cat") == "user_annotation" and e.get("name", "").startswith(PROFILER_STEP)]
    else:
        found = [e for e in events if e.get("name") == step_name and e.get("cat") == "user_annotation"]
    return sorted(found, key=lambda e: float(e["ts"]))


def split_trace(trace: dict, step_name: str = STEP_RANGE) -> dict:
    """The split of every step of one rank's trace: {"device": "cpu"|"cuda", "steps": [per step: the
    PARTS in seconds, "comm_s_by_kind", "exposed_comm_s_by_kind", "calls"], "missing": {part: why}}."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]
    steps = step_ranges(events, step_name)
    if not steps:
        return {"device": None, "steps": [], "missing": {"step_s": f"no {step_name} range in the trace"}}
    split = _split_cuda(events, steps) if any(e.get("cat") == "kernel" for e in events) else _split_cpu(events, steps)
    if len(split["steps"]) == len(steps):
        for parts, ops in zip(split["steps"], step_ops(events, steps)):
            parts["ops"] = ops
    return split


# The host's operations and ranges of a step: what the ops summary counts (kernels are the device's).
OP_CATEGORIES = ("cpu_op", "user_annotation")


def step_ops(events: list[dict], steps: list[dict]) -> list[dict[str, list[float]]]:
    """Per step, every host operation's name -> [calls, self time in seconds]: its time less that of
    the operations nested in it on its thread (as the profiler's own tables count self time). The
    step ranges themselves are left out."""
    step_names = {s["name"] for s in steps}
    ops = [e for e in events if e.get("cat") in OP_CATEGORIES and e["name"] not in step_names]
    self_us: dict[int, float] = {}
    threads: dict[tuple, list[dict]] = {}
    for e in ops:
        threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for found in threads.values():
        stack: list[tuple[float, int]] = []  # (end, index into ops) of the enclosing operations
        for e in sorted(found, key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0)))):
            start, end = _span(e)
            while stack and stack[-1][0] <= start:
                stack.pop()
            self_us[id(e)] = end - start
            if stack:
                self_us[stack[-1][1]] -= end - start
            stack.append((end, id(e)))
    windows = [_span(s) for s in steps]
    out: list[dict[str, list[float]]] = [{} for _ in steps]
    for e in ops:
        start = float(e["ts"])
        for index, (low, high) in enumerate(windows):
            if low <= start < high:
                entry = out[index].setdefault(e["name"], [0, 0.0])
                entry[0] += 1
                entry[1] += max(0.0, self_us[id(e)]) / 1e6
                break
    return out


def _split_cpu(events: list[dict], steps: list[dict]) -> dict:
    thread = (steps[0].get("pid"), steps[0].get("tid"))
    mine = [e for e in events if (e.get("pid"), e.get("tid")) == thread]
    others = [e for e in events if (e.get("pid"), e.get("tid")) != thread]
    fsdp = merged(_span(e) for e in mine if e["name"].startswith("FSDP::"))
    c10d = sorted((e for e in mine if e["name"].startswith("c10d::")), key=lambda e: float(e["ts"]))
    calls = [e for e in c10d if e["name"] != "c10d::barrier"]
    outside = merged([*fsdp, *(_span(e) for e in c10d)])
    compute_all = subtract(merged(_span(e) for e in mine if e["name"].startswith("aten::")), outside)
    spans = sorted((e for e in others if e["name"].startswith("gloo:")), key=lambda e: float(e["ts"]))
    comm_spans = [e for e in spans if e["name"] != "gloo:barrier"]
    barriers = merged([*(_span(e) for e in spans if e["name"] == "gloo:barrier"),
                       *(_span(e) for e in c10d if e["name"] == "c10d::barrier")])  # fmt: skip
    by_kind: dict[str, list[Interval]] = {kind: [] for kind in (*KINDS, "other")}
    for span in comm_spans:
        by_kind[_issuing_kind(span, calls)].append(_span(span))
    out = []
    for step in steps:
        window = _span(step)
        compute = clipped(compute_all, window)
        kinds = {kind: clipped(merged(found), window) for kind, found in by_kind.items()}
        comm = merged(i for found in kinds.values() for i in found)
        idle = subtract([window], merged([*compute, *comm]))
        in_barrier = intersect(idle, clipped(barriers, window))
        parts = _parts(window, compute, comm, kinds)
        parts["barrier_s"] = length(in_barrier) / 1e6
        parts["fsdp_s"] = length(intersect(subtract(idle, in_barrier), clipped(fsdp, window))) / 1e6
        parts["calls"] = _count(collective_kind(e["name"]) for e in calls if window[0] <= float(e["ts"]) < window[1])
        out.append(parts)
    return {"device": "cpu", "steps": out, "missing": {}}


def _issuing_kind(span: dict, calls: list[dict]) -> str:
    """The kind of the c10d call that issued a gloo span: the last one to start before it (gloo's
    threads run a rank's collectives in the order the training thread issues them)."""
    start, kind = float(span["ts"]), None
    for call in calls:
        if float(call["ts"]) > start:
            break
        kind = collective_kind(call["name"])
    return kind or collective_kind(span["name"].removeprefix("gloo:"))


def _split_cuda(events: list[dict], steps: list[dict]) -> dict:
    launches = {}
    for e in events:
        correlation = (e.get("args") or {}).get("correlation")
        if e.get("cat") == "cuda_runtime" and correlation is not None:
            launches[correlation] = float(e["ts"])
    kernels = [e for e in events if e.get("cat") == "kernel"]  # memory copies and sets are gpu_memcpy/gpu_memset
    out = []
    for step in steps:
        start, end = _span(step)
        mine = [k for k in kernels if start <= launches.get((k.get("args") or {}).get("correlation"), -1.0) <= end]
        if not mine:
            continue
        comm_kernels = [k for k in mine if k["name"].startswith(NCCL_KERNELS)]
        compute = merged(_span(k) for k in mine if not k["name"].startswith(NCCL_KERNELS))
        window = (min(_span(k)[0] for k in mine), max(_span(k)[1] for k in mine))
        by_kind: dict[str, list[Interval]] = {kind: [] for kind in (*KINDS, "other")}
        for kernel in comm_kernels:
            by_kind[collective_kind(kernel["name"])].append(_span(kernel))
        kinds = {kind: merged(found) for kind, found in by_kind.items()}
        comm = merged(i for found in kinds.values() for i in found)
        parts = _parts(window, compute, comm, kinds)
        parts["fsdp_s"] = parts["barrier_s"] = None
        parts["calls"] = _count(collective_kind(k["name"]) for k in comm_kernels)
        out.append(parts)
    host_side = "host-side on a GPU: not split from the device's timeline"
    return {"device": "cuda", "steps": out, "missing": {"fsdp_s": host_side, "barrier_s": host_side}}


def _parts(window: Interval, compute: list[Interval], comm: list[Interval], kinds: dict) -> dict:
    """The step's parts in seconds (trace times are microseconds)."""
    overlapped = length(intersect(comm, compute))
    step, busy = window[1] - window[0], length(merged([*compute, *comm]))
    return {
        "step_s": step / 1e6,
        "compute_s": length(compute) / 1e6,
        "comm_s": length(comm) / 1e6,
        "overlapped_comm_s": overlapped / 1e6,
        "exposed_comm_s": (length(comm) - overlapped) / 1e6,
        "idle_s": (step - busy) / 1e6,
        "comm_s_by_kind": {k: length(v) / 1e6 for k, v in kinds.items() if v},
        "exposed_comm_s_by_kind": {k: length(subtract(v, compute)) / 1e6 for k, v in kinds.items() if v},
    }


def _count(kinds: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def rank_medians(split: dict) -> dict:
    """One rank's split as the median over its profiled steps (each part; per kind; calls)."""
    steps = split.get("steps") or []
    out: dict = {}
    for part in PARTS:
        values = [s[part] for s in steps if s.get(part) is not None]
        out[part] = statistics.median(values) if values else None
    for key in ("comm_s_by_kind", "exposed_comm_s_by_kind", "calls"):
        names = sorted({name for s in steps for name in s.get(key, {})})
        out[key] = {name: statistics.median(s.get(key, {}).get(name, 0) for s in steps) for name in names}
    names = sorted({name for s in steps for name in s.get("ops", {})})
    out["ops"] = {
        name: [statistics.median(s.get("ops", {}).get(name, (0, 0.0))[i] for s in steps) for i in (0, 1)]
        for name in names
    }
    return out


def cut_at_step(trace: dict, size: int, limit: float) -> tuple[dict, int | None]:
    """The trace cut at a whole step when its JSON (`size` bytes) is over `limit`: the events of the
    first k steps whose JSON fits (at least one step), and k; (trace, None) when it fits as it is."""
    if size <= limit:
        return trace, None
    events = trace.get("traceEvents", [])
    steps = step_ranges([e for e in events if e.get("ph") == "X" and "ts" in e])
    for kept in range(len(steps) - 1, 0, -1):
        cut = _first_steps(trace, steps[kept - 1])
        if len(json.dumps(cut)) <= limit:
            return cut, kept
    return _first_steps(trace, steps[0]) if steps else trace, 1


def _first_steps(trace: dict, last: dict) -> dict:
    end = _span(last)[1]
    events = [e for e in trace.get("traceEvents", []) if "ts" not in e or float(e["ts"]) <= end]
    return {**trace, "traceEvents": events}
