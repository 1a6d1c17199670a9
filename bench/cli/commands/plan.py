"""`fsdp-bench plan [OVERRIDES] [--json | --fields a,b.c] [--csv PATH]`: predicted memory, fit, step
time and scaling per point.

Every form prints the same plan objects (bench/analysis/planner/plan_object.py): `--json` all of
each, `--fields` the dotted keys asked for, one compact object per line; the table is compact past
a few hundred points, with every point in a CSV (reports/plan.py).

`--best [--top K] [--objective ...]` searches instead: every configuration of the setup
(strategy x precision x micro-batch x grad_accum x checkpointing x compile, constrained by the
overrides; bench/analysis/planner/search.py), ranked by the planner, the top K printed with the reason each
of the next ones loses.

No GPU and no torch: the planner (bench/analysis/planner) works from the model's shapes, the cluster
preset and its calibration. Exit 0, or 2 on invalid input (an unknown field among them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.cli.options import add_overrides, inspected
from reports.plan import COMPACT_ABOVE

# The lists of configurations in `plan --best --json`, each entry a plan object.
RANKED = ("top", "next", "beaten_by_not_fitting")

HELP = "predict memory, fit, throughput and scaling efficiency per point, without running it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_overrides(parser, "Hydra overrides; comma-separated values make a grid")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per point")
    parser.add_argument(
        "--fields",
        metavar="A,B.C",
        help="print only these dotted keys of each point's object as JSON, one object per line "
        "(e.g. point_id,fits,tokens_per_s,memory_bytes_per_device.total)",
    )
    parser.add_argument(
        "--csv",
        metavar="PATH",
        type=Path,
        help="write every point to PATH as CSV (without it, a plan of more than "
        f"{COMPACT_ABOVE} points writes one to a temporary file and prints its path)",
    )
    parser.add_argument(
        "--preflight",
        metavar="RESULTS",
        help="plan with the links and rates a preflight measured (a preflight.json, or a folder holding one)",
    )

    parser.add_argument(
        "--restart-from",
        metavar="RESULTS",
        help="set cluster.restart_s, where not given, to the restart cost measured by records under RESULTS "
        "of the same cluster that restarted (metrics.job)",
    )
    parser.add_argument(
        "--tokens",
        metavar="N",
        help="add each point's time (and cost, where the cluster has a price) to train N tokens, goodput at the "
        "best checkpoint interval included (K, M, B/G, T suffixes: 2T = 2e12)",
    )
    parser.add_argument(
        "--best",
        action="store_true",
        help="search strategy x precision x micro-batch x grad_accum x checkpointing x compile and rank "
        "what fits (overrides of those keys constrain the search)",
    )
    parser.add_argument("--top", default="3", metavar="K", help="with --best: how many configurations to show (3)")
    parser.add_argument(
        "--objective",
        help="with --best: tokens_per_s (default, search.objective), tokens_per_s_per_device, mfu; cost ($ per million "
        "tokens: needs cluster.usd_per_node_hour) or time_to_train (needs --tokens), which search nodes=8,16,... too",
    )


def main(args: argparse.Namespace) -> int:
    from bench.analysis.gc_pause import gc_paused

    if (done := inspected(args)) is not None:  # --cfg job / --info
        return done

    with gc_paused():  # a plan keeps every point's dicts until it prints (bench/analysis/gc_pause.py)
        return _plan(args)


def _plan(args: argparse.Namespace) -> int:
    from bench.config.paths import input_problem, output_problem, require

    require(
        [
            input_problem("--preflight", args.preflight) if args.preflight else None,
            input_problem("--restart-from", args.restart_from) if args.restart_from else None,
            output_problem("--csv", args.csv, "file", hint="allowed: a file path") if args.csv else None,
        ]
    )
    if args.best:
        return best(args)
    from bench.analysis.planner import predict_grid
    from bench.analysis.planner.plan_object import parse_fields
    from bench.config.compose import load_grid
    from bench.config.problems import ConfigError

    try:
        points = load_grid(args.overrides)
        preflight = None
        if args.preflight:  # imported only here: the preflight modules are a tenth of plan's start-up
            from bench.analysis.planner.from_preflight import compatibility_problem
            from bench.analysis.preflight import read_preflight

            preflight = read_preflight(args.preflight)
            problems = {p for point in points if (p := compatibility_problem(point.spec, preflight))}
            if problems:
                raise ConfigError(sorted(problems))
        tokens = tokens_to_train(args.tokens)
        specs = [point.spec for point in points]
        if args.restart_from:
            specs = with_measured_restart(specs, Path(args.restart_from))
        plans = predict_grid(specs, preflight)
        if tokens is not None:
            from bench.analysis.planner.failures import to_train

            for plan in plans:
                plan["to_train"] = to_train(tokens, plan)
        fields = parse_fields(args.fields, plans) if args.fields is not None else None
    except ValueError as exc:  # ConfigError too: bad input, and the planner's own refusals
        return refused(exc)
    if fields is not None or args.json:
        from reports.plan import write_plan_csv
        from reports.plan_json import fields_json, plan_json

        if args.csv is not None:
            write_plan_csv(plans, args.csv)
        # Written, then its newline: not joined first (a large plan's text is tens of megabytes).
        sys.stdout.write(fields_json(plans, fields) if fields is not None else plan_json(plans))
        sys.stdout.write("\n")
    else:
        from reports.plan import print_plan

        print_plan(plans, args.csv)
    return 0


def with_measured_restart(specs: list, results: Path) -> list:
    """The specs, each without a `cluster.restart_s` given taking the one measured by the records under
    `results` of its cluster (bench/analysis/planner/failures.py `measured_restart_s`); a cluster no
    record restarted on is refused in one line."""
    from bench.analysis.planner.failures import measured_restart_s
    from bench.analysis.records import load_records
    from bench.config.problems import ConfigError

    records, _ = load_records(results)
    jobs: dict[str, list] = {}
    for record in records:
        if record.metrics.job is not None:
            jobs.setdefault(record.spec.cluster.name, []).append(record.metrics.job)
    out = []
    for spec in specs:
        if spec.cluster.restart_s is not None:
            out.append(spec)
            continue
        measured = measured_restart_s(jobs.get(spec.cluster.name, []))
        if measured is None:
            raise ConfigError(
                [f"--restart-from: no record under {results} of cluster {spec.cluster.name} restarted after a failure"]
            )
        out.append(spec.model_copy(update={"cluster": spec.cluster.model_copy(update={"restart_s": measured})}))
    return out


def tokens_to_train(raw: str | None) -> float | None:
    """`--tokens`'s count, or None without it; ConfigError (one line) for one that does not parse."""
    if raw is None:
        return None
    from bench.config.problems import ConfigError
    from bench.schema.units import parse_count

    try:
        return parse_count(raw)
    except ValueError:
        raise ConfigError(
            [f"--tokens: cannot read {raw!r}; allowed: a positive number with an optional suffix K, M, B/G, T (2T)"]
        ) from None


def best(args: argparse.Namespace) -> int:
    """`--best`: search, rank, print the top K (exit 2 on an empty space or bad flags)."""
    from bench.analysis.planner.plan_object import parse_fields, pick
    from bench.analysis.planner.search import as_json, search
    from bench.analysis.preflight import read_preflight
    from bench.config.problems import ConfigError

    try:
        if args.csv is not None:
            raise ConfigError(["--csv: writes a grid's points; with --best use --json or --fields"])
        top = top_count(args.top)
        preflight = read_preflight(args.preflight) if args.preflight else None
        overrides = list(args.overrides)
        if tokens_to_train(args.tokens) is not None:  # --tokens: search.tokens, checked here for its one line
            overrides.append(f"search.tokens={args.tokens}")
        result = search(overrides, args.objective, preflight)
        found = as_json(result, top)
        ranked = [found[key] for key in RANKED]
        fields = parse_fields(args.fields, [c for group in ranked for c in group]) if args.fields is not None else None
    except ValueError as exc:  # ConfigError too: bad input, and the planner's own refusals
        return refused(exc)
    if fields is not None:
        found.update({key: [pick(c, fields) for c in found[key]] for key in RANKED})
    if fields is not None or args.json:
        print(json.dumps(found, indent=2))
    else:
        from reports.plan import print_search

        print_search(result, top)
    return 0


def refused(exc: ValueError) -> int:
    """Bad input (a ConfigError's lines) or the planner's refusal (unknown device, missing peak): exit 2."""
    for line in getattr(exc, "lines", None) or [str(exc)]:
        print(f"error: {line}", file=sys.stderr)
    return 2


def top_count(raw: str) -> int:
    from bench.config.problems import ConfigError

    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError([f"--top: must be a whole number of at least 1, got {raw}"])
    return value
