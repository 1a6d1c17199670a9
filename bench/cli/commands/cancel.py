"""`fsdp-bench cancel RESULTS`: stop whatever a results folder's locks and launch files name.

For each sweep folder in RESULTS (RESULTS itself, or the sweep folders in it): an fsdp-bench on
this host that holds the folder's lock gets SIGTERM (it records its running point as
`interrupted` and stops its launch, as on Ctrl-C); then, holding the lock itself, it cancels every
cluster job a launch folder names that still runs (bench/run/ownership/jobs.py: `scancel`, `kubectl delete`).
Exit 0 when nothing named is left running, 1 when something could not be stopped (a holder on
another host, a job that did not end), 2 when RESULTS is not a folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "stop the fsdp-bench and the cluster jobs that a results folder's locks and launch files name"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="a results folder (results_dir) or one sweep folder in it")


def main(args: argparse.Namespace) -> int:
    from bench.config.paths import input_problem, require
    from bench.run.ownership.cancel import cancel_results

    results = args.results
    require([input_problem("RESULTS", results, "folder", hint="give a results folder (results_dir) or a sweep folder")])
    all_stopped, anything = cancel_results(results)
    if not anything:
        print(f"nothing to cancel in {results}")
    return 0 if all_stopped else 1
