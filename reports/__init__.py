"""Results -> tidy DataFrame -> PNG plots -> one self-contained HTML page (never imports torch).

`reports.build_report(records, out_dir, title=..., reproduce=...)` is the entry point; it is
loaded lazily so that importing a light submodule (reports.frame for the store's exports)
does not pull in matplotlib and Jinja2.
"""

from __future__ import annotations

from typing import Any

__all__ = ["analyse", "build_report"]


def __getattr__(name: str) -> Any:
    if name == "build_report":
        from reports.build import build_report

        return build_report
    if name == "analyse":
        from reports.analysis import analyse

        return analyse
    raise AttributeError(f"module 'reports' has no attribute {name!r}")
