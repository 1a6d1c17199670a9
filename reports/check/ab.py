"""`fsdp-bench ab`'s outputs: the printed table and OUT/ab.json (commands, environments, runs, rows)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bench.analysis.check.abtest import AbRow
from bench.analysis.stats import CONFIDENCE_PCT
from bench.run.ab import RunOutcome
from bench.schema.files import write_text_atomic


def ab_table(rows: list[AbRow]) -> list[list[str]]:
    """Rows for text_table: point, rounds, medians, ratio, CI, p, verdict (and why p and CI part)."""
    return [
        [
            r.point,
            f"{r.rounds_a}/{r.rounds_b}",
            f"{r.median_a:,.1f}",
            f"{r.median_b:,.1f}",
            f"{r.ratio:.4f}",
            f"[{r.ci_low:.4f}, {r.ci_high:.4f}]",
            f"{r.p_value:.2g}",
            r.verdict_text,
        ]
        for r in rows
    ]


AB_HEADERS = ("point", "rounds A/B", "A tokens/s", "B tokens/s", "B/A", f"{CONFIDENCE_PCT}% CI", "p (one-sided)", "verdict")  # fmt: skip


def write_summary(
    out: Path,
    rows: list[AbRow],
    envs: dict,
    commands: dict,
    outcomes: list[RunOutcome],
    side_overrides: dict[str, list[str]] | None = None,
) -> Path:
    """OUT/ab.json: the commands, environments, every run's outcome and the per-point rows."""
    path = out / "ab.json"
    doc = {
        "commands": commands,
        "side_overrides": side_overrides or {},
        "env": envs,
        "runs": [asdict(o) for o in outcomes],
        "points": [asdict(r) for r in rows],
    }
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path
