#!/usr/bin/env python
"""Simulate history's power table (bench/analysis/history/data/power.json) with the detector itself.

For each (runs before, runs after) of the table: unit-normal noise on log values, a drop placed after
the runs before, and the smallest drop (in units of noise) that history's gate on the last `runs
after` runs catches in at least 95 % of the draws, by bisection over the same draws
(bench.analysis.history.power.simulate_cell; each cell seeded by (--seed, before, after), so a
unit test recomputes a cell exactly). Cells need the detector's minimum series length and fit in
its window.

    .venv/bin/python scripts/power_table.py --simulations 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RUNS_BEFORE = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 28)
RUNS_AFTER = (2, 3, 4, 5, 6, 8, 10)


def main(argv: list[str] | None = None) -> int:
    from bench.analysis.history.detect import MAX_PVALUE, MIN_RUNS_AFTER, MIN_SERIES_RUNS, WINDOW, detector_name
    from bench.analysis.history.power import DETECTION_PROBABILITY, TABLE, simulate_cell

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=1000, help="noise draws per cell (default 1000)")
    parser.add_argument("--seed", type=int, default=46, help="seed of every cell's draws (default 46)")
    parser.add_argument("-o", "--out", type=Path, default=TABLE, help=f"the table (default {TABLE.relative_to(REPO)})")
    args = parser.parse_args(argv)
    cells = []
    started = time.perf_counter()
    for after in RUNS_AFTER:
        for before in RUNS_BEFORE:
            if before + after < MIN_SERIES_RUNS or before + after > WINDOW:
                continue
            shift = simulate_cell(before, after, args.simulations, args.seed)
            cells.append([before, after, shift])
            print(f"before {before:2d} after {after:2d}: {shift} ({time.perf_counter() - started:.0f} s)", flush=True)
    table = {
        "what": "smallest drop of log values, in units of their per-run standard deviation, that history's gate "
        "on the last `after` runs detects with the probability below; null: none up to 20",
        "detector": detector_name(),
        "max_pvalue": MAX_PVALUE,
        "window": WINDOW,
        "min_runs_after": MIN_RUNS_AFTER,
        "probability": DETECTION_PROBABILITY,
        "simulations": args.simulations,
        "seed": args.seed,
        "command": f"scripts/power_table.py --simulations {args.simulations} --seed {args.seed}",
        "runs_before": list(RUNS_BEFORE),
        "runs_after": list(RUNS_AFTER),
        "cells": cells,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {args.out} ({len(cells)} cells, {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
