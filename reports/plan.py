"""Console tables for `fsdp-bench plan`: one row per point, predictions then memory breakdown.

A plan of more than COMPACT_ABOVE points prints compactly instead: what varies, then one row per
setup (model, cluster, world shape, sequence) with its fastest configuration that fits, and
every point in a CSV file (`--csv PATH`, else a temporary file) whose path it prints.
`plan --best` has its own tables (`print_search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.schema.labels import configuration_label, point_label
from bench.schema.units import GIB

MEMORY_COLUMNS = (
    "params",
    "grads",
    "optimizer",
    "unsharded_params",
    "unsharded_grads",
    "activations",
    "logits",
    "headroom",
    "total",
)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def fits_text(p: dict[str, Any]) -> str:
    """Whether the point fits, with the margin in GiB (free memory left, or missing when negative)."""
    margin = (p["device_memory_bytes"] - p["memory_bytes_per_device"]["total"]) / GIB
    if p["spec"]["cluster"]["device_type"] == "cpu":  # a host's RAM is shared by its ranks
        return "yes" if p["fits"] else "[red]no[/red]"
    return f"yes ({margin:+.1f})" if p["fits"] else f"[red]no ({margin:+.1f})[/red]"


def summary_table(predictions: Sequence[dict[str, Any]]):
    from rich.table import Table

    table = Table(title="fsdp-bench plan: predicted per point", title_justify="left")
    for name in (
        "point",
        "cluster",
        "mem GiB",
        "fits (margin GiB)",
        "max mb",
        "step s",
        "compute",
        "exposed comm",
        "other",
        "tok/s/dev",
        "MFU",
        "scaling",
    ):
        table.add_column(name, justify="left" if name in ("point", "cluster") else "right")
    for p in predictions:
        split = p["step_time_split_s"]
        memory = p["memory_bytes_per_device"]["total"] / GIB
        capacity = p["device_memory_bytes"] / GIB
        scaling = _pct(p["scaling_efficiency"])
        if p["scaling_baseline_nodes"] is not None:
            scaling += f" vs {p['scaling_baseline_nodes']}n"
        table.add_row(
            point_label(p["spec"]),
            p["spec"]["cluster"]["name"],
            f"{memory:.1f}/{capacity:.0f}",
            fits_text(p),
            str(p["max_micro_batch"]),
            f"{p['step_time_s']:.3f}",
            f"{split['compute']:.3f}",
            f"{split['exposed_comm']:.3f}",
            f"{split['other']:.3f}",
            f"{p['tokens_per_s_per_device']:,.0f}",
            _pct(p["mfu"]),
            scaling,
        )
    return table


def memory_table(predictions: Sequence[dict[str, Any]]):
    from rich.table import Table

    table = Table(title="memory per device (GiB)", title_justify="left")
    table.add_column("point")
    for name in MEMORY_COLUMNS:
        table.add_column(name.replace("_", " "), justify="right")
    for p in predictions:
        memory = p["memory_bytes_per_device"]
        table.add_row(point_label(p["spec"]), *(f"{memory[name] / GIB:.2f}" for name in MEMORY_COLUMNS))
    return table


def checkpoint_table(predictions: Sequence[dict[str, Any]]):
    """Per point with train.checkpoint: one save's size and time, training blocked per save, goodput."""
    from rich.table import Table

    table = Table(title="checkpoint per save (train.checkpoint)", title_justify="left")
    for name in ("point", "mode", "every", "state GB", "storage Gb/s", "write s", "blocked s", "goodput"):
        table.add_column(name, justify="left" if name == "point" else "right")
    for p in predictions:
        train, ckpt = p["spec"]["train"], p["checkpoint"]
        if train.get("checkpoint", "none") == "none":
            continue
        blocked = ckpt["blocked_s"]
        table.add_row(
            point_label(p["spec"]),
            train["checkpoint"],
            str(train.get("checkpoint_every") or train["steps"] - train["warmup_steps"]),
            f"{ckpt['state_bytes'] / 1e9:,.1f}",
            f"{ckpt['storage_gbps']:g}",
            f"{ckpt['write_s']:.3g}",
            "-" if blocked is None else f"{blocked:.3g}",
            _pct(ckpt["goodput"]),
        )
    return table


def failures_table(predictions: Sequence[dict[str, Any]]):
    """Per point with a failure model, a price or tokens to train: the job's MTBF, the best checkpoint
    interval and its goodput, dollars per million tokens (with the price's date and source), and the
    time and cost to train (bench/analysis/planner/failures.py)."""
    from rich.table import Table

    table = Table(title="failures and cost", title_justify="left")
    names = ("point", "job MTBF h", "Young s", "best every", "goodput", "$/Mtoken", "price of", "to train", "cost $")
    for name in names:
        table.add_column(name, justify="left" if name in ("point", "price of") else "right")
    for p in predictions:
        failures, cost, train = p.get("failures") or {}, p.get("cost") or {}, p.get("to_train") or {}
        price_of = " ".join(str(v) for v in (cost.get("price_as_of"), cost.get("price_source")) if v)
        table.add_row(
            point_label(p["spec"]),
            f"{failures['job_mtbf_h']:,.1f}" if failures else "-",
            f"{failures['young_interval_s']:,.0f}" if failures else "-",
            f"{failures['checkpoint_every']:,} steps" if failures else "-",
            _pct(failures.get("goodput")) if failures else "-",
            f"{cost['usd_per_mtoken']:.3g}" if cost.get("usd_per_mtoken") else "no price",
            price_of or ("given, unsourced" if cost else "-"),
            _duration(train.get("hours")),
            f"{train['usd']:,.0f}" if train.get("usd") else "-",
        )
    return table


def _duration(hours: float | None) -> str:
    if hours is None:
        return "-"
    return f"{hours / 24:,.1f} d" if hours >= 48 else f"{hours:,.3g} h"


def assumption_lines(predictions: Sequence[dict[str, Any]]) -> list[str]:
    """One line per distinct set of assumptions (cluster, efficiency, calibration)."""
    seen: dict[str, None] = {}
    for p in predictions:
        a = p["assumptions"]
        line = f"{a['cluster']} ({a['device']}): achieved {a['achieved_tflops_per_device']:.3g} TFLOP/s per device, "
        links = a.get("collective_links") or {}
        if links:
            kinds = [k.removesuffix("_gbps") for k in links if k.endswith("_gbps")]
            line += "measured gloo " + ", ".join(f"{k} {links[k + '_gbps']:.2f} Gb/s" for k in kinds)
        else:
            line += f"NVLink {a['intra_node_gbps']:g} Gb/s per GPU, network {a['inter_node_gbps']:g} Gb/s per node"
        line += f", overlap interference {a['overlap_interference']:g}"
        if "calibration" in a:
            line += f", calibration: {a['calibration']}"
        seen[line] = None
    return list(seen)


# Beyond this many points the table is compact: the best configuration of each setup, and every
# point in a CSV file. Rich lays a 10,080-row table out in tens of seconds, and no one reads it.
COMPACT_ABOVE = 200
# Setups the compact table shows (the CSV has every point).
SETUP_ROWS = 50
# The CSV's columns: plan-object fields (bench/analysis/planner/plan_object.py), so `plan --fields`
# with the same names gives the same numbers; raw units (bytes, seconds, fractions).
CSV_FIELDS = (
    "point_id",
    "spec.model.name",
    "spec.cluster.name",
    "spec.nodes",
    "spec.gpus_per_node",
    "spec.strategy",
    "spec.precision",
    "spec.train.seq_len",
    "spec.train.micro_batch",
    "spec.train.grad_accum",
    "spec.train.activation_checkpointing",
    "spec.train.compile",
    "spec.train.checkpoint",
    "fits",
    "max_micro_batch",
    "device_memory_bytes",
    *(f"memory_bytes_per_device.{name}" for name in MEMORY_COLUMNS),
    "step_time_s",
    "step_time_split_s.compute",
    "step_time_split_s.exposed_comm",
    "step_time_split_s.other",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "mfu",
    "hfu",
    "scaling_efficiency",
    "scaling_baseline_nodes",
    "checkpoint.state_bytes",
    "checkpoint.write_s",
    "checkpoint.blocked_s",
    "checkpoint.goodput",
)
# A setup in the compact table: the model, cluster, world shape and sequence, what `plan --best`
# holds fixed while it searches the other axes (bench/analysis/planner/search.py).
SETUP_FIELDS = ("spec.model.name", "spec.cluster.name", "spec.nodes", "spec.gpus_per_node", "spec.train.seq_len")


def print_plan(plans: Sequence[dict[str, Any]], csv_path: Path | None = None) -> None:
    """The plan's tables; past COMPACT_ABOVE points the compact form, with every point in a CSV
    (at `csv_path`, else a new temporary file)."""
    import sys

    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 220)
    compact = len(plans) > COMPACT_ABOVE
    if compact and csv_path is None:
        csv_path = new_csv_path()
    # Each point's CSV columns, picked once: the CSV writes them and the compact table counts them.
    rows = plan_rows(plans) if csv_path is not None else None
    if csv_path is not None:
        write_plan_csv(plans, csv_path, rows)
    if compact:
        for line in compact_header(plans, csv_path, rows):
            console.print(line, highlight=False)
        console.print(setup_table(plans, rows))
    else:
        console.print(summary_table(plans))
        console.print(memory_table(plans))
        if any(p["spec"]["train"].get("checkpoint", "none") != "none" for p in plans):
            console.print(checkpoint_table(plans))
        if any(key in p for p in plans for key in ("failures", "cost", "to_train")):
            console.print(failures_table(plans))
        if csv_path is not None:
            console.print(f"every point, one row each: {csv_path}", highlight=False)
    for line in assumption_lines(plans):
        console.print(f"assumes {line}", highlight=False)
    console.print(
        "scaling: per-device tokens/s against the smallest node count of the same model, strategy, "
        "precision, cluster and per-device batch (weak scaling: the global batch grows with the nodes)",
        highlight=False,
    )


def new_csv_path() -> Path:
    """A new file in the temporary folder for a large plan's full table."""
    import os
    import tempfile

    handle, name = tempfile.mkstemp(prefix="fsdp-bench-plan-", suffix=".csv")
    os.close(handle)
    return Path(name)


Rows = list[list[Any]]


def plan_rows(plans: Sequence[dict[str, Any]]) -> Rows:
    """Each point's CSV_FIELDS values, in their order (None where a point lacks one)."""
    from bench.analysis.planner.plan_object import pick

    return [list(pick(p, CSV_FIELDS).values()) for p in plans]


def write_plan_csv(plans: Sequence[dict[str, Any]], path: Path, rows: Rows | None = None) -> None:
    """Every point, one row each: `point` (its label), then CSV_FIELDS (`rows`, else picked here);
    written atomically (its folders created), a full disk naming `path`."""
    import csv

    from bench.schema.files import atomic_path

    rows = plan_rows(plans) if rows is None else rows
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["point", *CSV_FIELDS])
        # A missing value (None) is an empty cell: the csv module writes None so.
        out.writerows([point_label(p["spec"]), *row] for p, row in zip(plans, rows, strict=True))


def varying(plans: Sequence[dict[str, Any]], rows: Rows | None = None) -> dict[str, int]:
    """The spec's CSV columns that take more than one value in the plan, with how many each takes."""
    rows = plan_rows(plans) if rows is None else rows
    counts = {
        field.removeprefix("spec.").removesuffix(".name"): len({row[i] for row in rows})
        for i, field in enumerate(CSV_FIELDS)
        if field.startswith("spec.")
    }
    return {name: count for name, count in counts.items() if count > 1}


def compact_header(plans: Sequence[dict[str, Any]], csv_path: Path, rows: Rows | None = None) -> list[str]:
    fitting = sum(1 for p in plans if p["fits"])
    axes = ", ".join(f"{name} ({count})" for name, count in varying(plans, rows).items())
    return [
        f"fsdp-bench plan: {len(plans):,} points, {fitting:,} predicted to fit, {len(plans) - fitting:,} not",
        f"varies: {axes}" if axes else "varies: nothing",
        f"every point, one row each: {csv_path}",
    ]


def setups(plans: Sequence[dict[str, Any]], rows: Rows | None = None) -> dict[tuple, list[dict[str, Any]]]:
    """The plan's points by setup (SETUP_FIELDS, read from their CSV `rows`), in the grid's order."""
    rows = plan_rows(plans) if rows is None else rows
    columns = [CSV_FIELDS.index(field) for field in SETUP_FIELDS]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for p, row in zip(plans, rows, strict=True):
        groups.setdefault(tuple(row[i] for i in columns), []).append(p)
    return groups


def setup_table(plans: Sequence[dict[str, Any]], rows: Rows | None = None):
    """One row per setup (model, cluster, world shape, sequence): its fastest configuration that fits."""
    from rich.table import Table

    groups = setups(plans, rows)
    shown = list(groups.items())[:SETUP_ROWS]
    title = f"fastest configuration that fits, per setup ({len(groups):,} setups"
    title += f", the first {SETUP_ROWS} shown)" if len(groups) > SETUP_ROWS else ")"
    table = Table(title=title, title_justify="left")
    for name in ("model", "cluster", "nodes x gpus", "seq", "points", "fit", "fastest that fits", "tok/s", "tok/s/dev", "MFU", "mem GiB", "step s", "scaling"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("model", "cluster", "fastest that fits") else "right")
    for (model, cluster, nodes, gpus, seq), members in shown:
        fitting = [p for p in members if p["fits"]]
        head = [model, cluster, f"{nodes}x{gpus}", str(seq), f"{len(members):,}", f"{len(fitting):,}"]
        if not fitting:
            table.add_row(*head, "[red]none fits[/red]", *["-"] * 6)
            continue
        best = max(fitting, key=lambda p: p["tokens_per_s"])  # the first on a tie: the grid's order
        scaling = _pct(best["scaling_efficiency"])
        if best["scaling_baseline_nodes"] is not None:
            scaling += f" vs {best['scaling_baseline_nodes']}n"
        table.add_row(
            *head,
            configuration_label(best["spec"]),
            f"{best['tokens_per_s']:,.0f}",
            f"{best['tokens_per_s_per_device']:,.0f}",
            _pct(best["mfu"]),
            f"{best['memory_bytes_per_device']['total'] / GIB:.1f}/{best['device_memory_bytes'] / GIB:.0f}",
            f"{best['step_time_s']:.3f}",
            scaling,
        )
    return table


def search_tables(result, top: int):
    """`plan --best`: the top K configurations, then the next K and why each loses to #1."""
    from rich.table import Table

    from bench.analysis.planner.search import loss_reason

    objective, winner = result.objective, result.ranked[0]
    best = winner.value(objective)
    label = _search_label(result)
    extra = objective in ("cost", "time_to_train")  # the objective's own value: not among the columns
    ranked = Table(title=f"top {min(top, len(result.ranked))} by predicted {objective}", title_justify="left")
    names = ("#", "configuration", *((objective,) if extra else ()), "tok/s", "tok/s/dev", "MFU", "mem GiB", "step s",
             "compute", "exposed comm", "other")  # fmt: skip
    for name in names:
        ranked.add_column(name, justify="left" if name == "configuration" else "right")
    for i, c in enumerate(result.ranked[:top], 1):
        p = c.prediction
        split = p["step_time_split_s"]
        ranked.add_row(
            str(i), label(c), *((_objective_text(objective, c.value(objective)),) if extra else ()),
            f"{p['tokens_per_s']:,.0f}", f"{p['tokens_per_s_per_device']:,.0f}",
            _pct(p["mfu"]), f"{p['memory_bytes_per_device']['total'] / GIB:.1f}/{p['device_memory_bytes'] / GIB:.0f}",
            f"{p['step_time_s']:.3f}", f"{split['compute']:.3f}", f"{split['exposed_comm']:.3f}", f"{split['other']:.3f}",
        )  # fmt: skip
    following = result.ranked[top : 2 * top]
    losers = Table(title=f"the next {len(following)} and why each loses to #1", title_justify="left")
    for name in ("#", "configuration", objective, "vs #1", "main reason"):
        losers.add_column(name, justify="left" if name in ("configuration", "main reason") else "right")
    for i, c in enumerate(following, top + 1):
        value = c.value(objective)
        shown = _objective_text(objective, value)
        losers.add_row(str(i), label(c), shown, f"{value / best - 1:+.1%}", loss_reason(c, winner))
    return ranked, losers if following else None


def _objective_text(objective: str, value: float) -> str:
    if objective == "mfu":
        return _pct(value)
    if objective == "cost":
        return f"{value:.3g} $/Mtok"
    if objective == "time_to_train":
        return _duration(value)
    return f"{value:,.0f}"


def _search_label(result):
    """A candidate's label: its searched axes, and its node count where nodes are searched."""
    from bench.analysis.planner.search import candidate_label

    if "nodes" not in result.axes:
        return candidate_label
    return lambda c: f"{c.point.spec.nodes} nodes {candidate_label(c)}"


def search_header(result) -> list[str]:
    s = result.setup
    excluded = sum(result.excluded.values())
    nodes = ",".join(result.axes["nodes"]) if "nodes" in result.axes else s["nodes"]
    lines = [
        f"fsdp-bench plan --best: {s['model']['name']} on {nodes} x {s['gpus_per_node']} {s['cluster']['name']} "
        f"({s['cluster']['device']['name']}), sequence {s['train']['seq_len']}, ranked by predicted {result.objective}",
        f"searched {result.searched:,} configurations: {len(result.ranked):,} fit, {len(result.not_fitting):,} do not fit, "
        f"{excluded:,} break a launch rule",
    ]
    lines += [
        f"  excluded {count:,}: {problem}" for problem, count in sorted(result.excluded.items(), key=lambda i: -i[1])
    ]
    lines.append("searched: " + "; ".join(f"{axis}={','.join(values)}" for axis, values in result.axes.items()))
    return lines


def print_search(result, top: int) -> None:
    import sys

    from rich.console import Console

    from bench.analysis.planner.search import does_not_fit

    console = Console(width=None if sys.stdout.isatty() else 220)
    for line in search_header(result):
        console.print(line, highlight=False)
    ranked, losers = search_tables(result, top)
    console.print(ranked)
    if losers is not None:
        console.print(losers)
    misfits = result.beaten_by_misfits()
    if misfits:
        console.print(
            f"{len(misfits):,} configuration(s) predicted above #1 do not fit; the nearest to fitting, "
            f"{does_not_fit(misfits[0]).removeprefix('does not fit: ')} "
            f"(it would give {misfits[0].value(result.objective) / result.ranked[0].value(result.objective) - 1:+.1%})",
            highlight=False,
        )
    for line in assumption_lines([c.prediction for c in result.ranked[:top]]):
        console.print(f"assumes {line}", highlight=False)


def autotune_lines(autotuned) -> list[str]:
    """Lines the sweep prints: what was searched and the configurations it will run."""
    from bench.analysis.planner.search import candidate_label

    result = autotuned.result
    lines = [
        f"autotune: the {len(autotuned.points)} best of {result.searched:,} configurations searched "
        f"({len(result.ranked):,} fit), by predicted {result.objective}:"
    ]
    for rank, candidate in enumerate(result.ranked[: len(autotuned.points)], 1):
        lines.append(f"  {rank}. {candidate_label(candidate)}: {candidate.value(result.objective):,.4g}")
    return lines
