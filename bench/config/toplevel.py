"""The top-level keys of sweeps/config.yaml that configure a sweep's command rather than a point:
`results_dir` (where point folders go) and `report` (write the report after the sweep). They are
no RunSpec field, so their defaults live here, once; tests/unit/test_yaml_defaults.py compares them
with the YAML's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RESULTS_DIR = "results"
REPORT = True


def results_dir(cfg: Any) -> Path:
    """The composed config's results folder (the default when the key is absent or null)."""
    return Path(cfg.get("results_dir") or RESULTS_DIR)


def wants_report(cfg: Any) -> bool:
    """Whether the sweep writes its report when it ends."""
    value = cfg.get("report")
    return REPORT if value is None else bool(value)
