"""Fit the planner's GPU constants to the published figures, once, by a fixed procedure.

    python -m bench.analysis.planner.fit            # print the fit and the validation tables
    python -m bench.analysis.planner.fit --write    # also store the values in bench/analysis/planner/calibration.py

Procedure (data: bench/analysis/planner/data/published_calibration.csv, 17 bf16 rows on H100, 2 fp8 rows):
1. `compile_speedup`: the geometric mean, over the torchtitan bf16 rows measured both ways at
   the same GPU count, of compiled over eager tokens/s.
2. For every pair (`cuda_interference`, `network_half_nodes`) on a fixed grid (interference 0
   to 1 in steps of 0.05; half-nodes 4 to 256 in steps of sqrt(2), or none), set
   `h100_efficiency` so that the median of predicted/published tokens/s over all rows is 1
   (fixed-point iteration: throughput is close to proportional to efficiency), then compute
   each series' predicted scaling efficiency (largest vs smallest GPU count).
3. Keep the pair with the smallest sum of squared scaling-efficiency errors (in points).
4. `fp8_matmul_efficiency`: set so that the median over the fp8 rows of the predicted speed-up
   over their bf16 counterparts (torchtitan compile + float8 vs compile) equals the published
   one (fixed-point iteration, as in 2). A ratio, so the device difference that the bf16 rows
   show cancels out.
Scaling efficiencies are ratios within a series, so they are fitted by the two communication
constants; absolute throughput is then set by the one compute constant. Steps 1-3 use the bf16
rows only.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.analysis.planner import calibration
from bench.analysis.planner.published import (
    PublishedRow,
    anchor_table,
    fit_rows,
    fp8_table,
    load_rows,
    median_abs_error,
    memory_table,
    published_ranks,
    scaling_table,
    throughput_table,
)

INTERFERENCE_GRID = [round(0.05 * i, 2) for i in range(21)]
HALF_NODES_GRID = [round(4 * math.sqrt(2) ** i, 1) for i in range(13)] + [0.0]  # 0: no congestion


@contextmanager
def fit_values(**values: float) -> Iterator[None]:
    """Temporarily evaluate the planner with other GPU constants."""
    saved = dict(calibration.GPU_FIT)
    calibration.GPU_FIT.update(values)
    try:
        yield
    finally:
        calibration.GPU_FIT.clear()
        calibration.GPU_FIT.update(saved)


def fit_compile_speedup(rows: list[PublishedRow]) -> float:
    rows = fit_rows(rows)
    eager = {(r.model, r.gpus): r.tokens_per_s_per_gpu for r in rows if not r.compile}
    ratios = [
        r.tokens_per_s_per_gpu / eager[(r.model, r.gpus)] for r in rows if r.compile and (r.model, r.gpus) in eager
    ]
    return math.exp(statistics.fmean(math.log(x) for x in ratios))


def fit_efficiency(rows: list[PublishedRow], start: float = 0.5) -> float:
    """The efficiency at which the median predicted/published throughput ratio is 1."""
    efficiency = start
    for _ in range(20):
        with fit_values(h100_efficiency=efficiency):
            ratios = [float(e["published"]) / float(e["predicted"]) for e in throughput_table(rows)]
        step = statistics.median(ratios)
        efficiency *= step
        if abs(step - 1) < 1e-5:
            break
    return efficiency


def scaling_sse(rows: list[PublishedRow]) -> float:
    return sum(float(s["error_pp"]) ** 2 for s in scaling_table(throughput_table(rows)))


def fit_fp8_efficiency(rows: list[PublishedRow], low: float = 0.05, high: float = 2.0) -> float:
    """The fp8 matmul efficiency at which the median predicted fp8 speed-up is the published one
    (bisection: the predicted speed-up grows with the efficiency)."""

    def gap(efficiency: float) -> float:
        with fit_values(fp8_matmul_efficiency=efficiency):
            table = fp8_table(rows)
        predicted = statistics.median(float(e["speedup_predicted"]) for e in table)
        return predicted - statistics.median(float(e["speedup_published"]) for e in table)

    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if gap(mid) < 0 else (low, mid)
    return (low + high) / 2


def fit(rows: list[PublishedRow] | None = None) -> dict[str, float]:
    """The procedure of the module docstring; returns the five GPU constants."""
    all_rows = rows or load_rows()
    rows = fit_rows(all_rows)
    speedup = fit_compile_speedup(rows)
    best: tuple[float, dict[str, float]] | None = None
    for kappa in INTERFERENCE_GRID:
        for half in HALF_NODES_GRID:
            values = {"cuda_interference": kappa, "network_half_nodes": half, "compile_speedup": speedup}
            with fit_values(**values):
                values["h100_efficiency"] = fit_efficiency(rows)
                with fit_values(h100_efficiency=values["h100_efficiency"]):
                    sse = scaling_sse(rows)
            if best is None or sse < best[0]:
                best = (sse, values)
    assert best is not None
    values = best[1]
    with fit_values(**values):
        values["fp8_matmul_efficiency"] = fit_fp8_efficiency(all_rows)
    return {k: round(v, 4) for k, v in values.items()}


def write(values: dict[str, float]) -> None:
    """Store the fitted values in calibration.py (the one line between the markers)."""
    path = Path(calibration.__file__)
    text = path.read_text()
    keys = ("h100_efficiency", "cuda_interference", "network_half_nodes", "compile_speedup", "fp8_matmul_efficiency")
    ordered = {k: values[k] for k in keys}
    line = "GPU_FIT = " + repr(ordered).replace("'", '"')
    path.write_text(re.sub(r"^GPU_FIT = \{.*\}$", line, text, count=1, flags=re.MULTILINE))


def report(all_rows: list[PublishedRow]) -> str:
    """Markdown tables: per-row throughput and per-series scaling, fp8, memory, predicted vs published."""
    rows = fit_rows(all_rows)
    throughput = throughput_table(rows)
    lines = ["| series | GPUs | predicted tok/s/GPU | published | error |", "|---|---:|---:|---:|---:|"]
    lines += [
        f"| {e['series']} | {e['gpus']} | {e['predicted']:,.0f} | {e['published']:,.0f} | {100 * e['error']:+.1f}% |"
        for e in throughput
    ]
    lines.append(f"\nmedian absolute error: {100 * median_abs_error(throughput):.1f}%\n")
    lines += ["| series | GPUs | predicted scaling | published | error (points) |", "|---|---|---:|---:|---:|"]
    lines += [
        f"| {s['series']} | {s['gpus']} | {100 * s['predicted']:.1f}% | {100 * s['published']:.1f}% | "
        f"{s['error_pp']:+.1f} |"
        for s in scaling_table(throughput)
    ]
    lines += [
        "\n| fp8 series | GPUs | predicted tok/s/GPU | published | fp8 error | bf16 error | "
        "predicted speed-up over bf16 | published |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {e['series']} | {e['gpus']} | {e['predicted']:,.0f} | {e['published']:,.0f} | {100 * e['error']:+.1f}% | "
        f"{100 * e['base_error']:+.1f}% | {e['speedup_predicted']:.3f} | {e['speedup_published']:.3f} |"
        for e in fp8_table(all_rows)
    ]
    lines += [
        "\n| memory series | GPUs | peak at | predicted allocated GiB | predicted reserved GiB | "
        "published reserved GiB | error | fits (margin GiB) |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {m['series']} | {m['gpus']} | {m['moment']} | {m['allocated_gib']:.1f} | {m['predicted_gib']:.1f} | "
        f"{m['published_gib']:.1f} | {100 * m['error']:+.1f}% | {'yes' if m['fits'] else 'no'} "
        f"({m['margin_gib']:+.1f}) |"
        for m in memory_table(all_rows)
    ]
    lines += [
        "\n| p5.48xlarge anchor | micro-batch | baseline nodes | predicted efficiency at 16 nodes | "
        "tok/s/GPU | MFU | exposed comm |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {a['model']} | {a['micro_batch']} | {a['baseline_nodes']} | {100 * a['efficiency']:.1f}% | "
        f"{a['tokens_per_s_per_gpu']:,.0f} | {100 * a['mfu']:.1f}% | {100 * a['exposed_comm_share']:.1f}% |"
        for a in anchor_table()
    ]
    lines += [
        "\n| published setup | GPUs | published configuration | rank among those that fit | "
        "rank, compile as published | the planner's #1 | #1 vs published |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    for r in published_ranks(rows):
        fit_note = "" if r["fits"] else f" (predicted not to fit: {r['memory_gib']:.1f} GiB)"
        lines.append(
            f"| {r['series']} | {r['gpus']} | {r['published']}{fit_note} | {r['rank']} of {r['of']} | "
            f"{r['rank_same_compile']} of {r['of_same_compile']} | {r['best']} | {100 * r['best_gain']:+.1f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fit in bench/analysis/planner/calibration.py")
    args = parser.parse_args()
    rows = load_rows()
    values = fit(rows)
    print("fitted:", values)
    with fit_values(**values):
        print(report(rows))
    if args.write:
        write(values)
        print(f"written to {calibration.__file__}")


if __name__ == "__main__":
    main()
