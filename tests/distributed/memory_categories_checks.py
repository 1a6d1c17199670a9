"""In-rank check of FSDP2's memory tracker against the planner: each point's categories at its peak.

Each point (label -> RunSpec JSON with profile.memory_categories on) is built and run exactly as the
worker does (fsdp_core.worker.build_training, fsdp_core.train.run_loop: the warm-up and timed steps,
then the tracked step), and its categories are gathered as the record's are (the rank whose tracked
peak was largest, fsdp_core.worker.gather_categories). Every rank returns the same report; the test
compares it with the planner (bench/analysis/memory_categories.py). Nothing here asserts.
"""

from __future__ import annotations

from engine_checks import trained_points

from fsdp_core.worker import gather_categories


def categories_report(specs: dict[str, str]) -> dict[str, dict]:
    """label -> {"categories": the record's metrics.peak_mem_by_category, "note": why none}."""
    report = {}
    for label, loop in trained_points(specs):
        categories, note = gather_categories(loop.mem_categories, loop.mem_categories_note)
        report[label] = {"categories": categories, "note": note}
    return report
