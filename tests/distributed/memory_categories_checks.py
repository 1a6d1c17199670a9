"""In-rank check of FSDP2's memory tracker against the planner: each point's categories at its peak.

Each point (label -> RunSpec JSON with profile.memory_categories on) is built and run exactly as the
worker does (fsdp_core.worker.build_training, fsdp_core.train.run_loop: the warm-up and timed steps,
then the tracked step), and its categories are gathered as the record's are (the rank whose tracked
peak was largest, fsdp_core.worker.gather_categories). Every rank returns the same report; the test
compares it with the planner (bench/analysis/memory_categories.py). Nothing here asserts.
"""

from __future__ import annotations

import datetime as dt

import torch

from bench.schema.spec import RunSpec
from fsdp_core.data import build_source
from fsdp_core.train import run_loop
from fsdp_core.worker import build_training, gather_categories

CPU = torch.device("cpu")
TIMEOUT = dt.timedelta(seconds=123)


def categories_report(specs: dict[str, str]) -> dict[str, dict]:
    """label -> {"categories": the record's metrics.peak_mem_by_category, "note": why none}."""
    report = {}
    for label, text in specs.items():
        spec = RunSpec.model_validate_json(text)
        model, optimizer, scaler = build_training(spec, CPU, TIMEOUT)
        source = build_source(spec.train.data, spec.model.vocab_size, spec.train.seed)
        loop = run_loop(model, optimizer, scaler, source, spec, CPU)
        categories, note = gather_categories(loop.mem_categories, loop.mem_categories_note)
        report[label] = {"categories": categories, "note": note}
        del model, optimizer, scaler, loop
    return report
