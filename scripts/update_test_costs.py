#!/usr/bin/env python
"""Write tests/file_costs.json from a whole-suite run's JUnit XML: each test file's measured seconds.

    scripts/test.sh --junitxml=/tmp/suite.xml
    .venv/bin/python scripts/update_test_costs.py /tmp/suite.xml

The suite hands files out costliest first (tests/conftest.py), so that under `--dist loadfile`
the long files start at once and the workers end together; a marker-based guess put files with
unmarked or once-per-session launches at the end (a 60 s file handed out last is a minute of one
worker busy alone). A file missing from the table (a new one) falls back to that guess. Refresh
the table when files are added or their cost moves a lot; its order is all that matters.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COSTS = ROOT / "tests" / "file_costs.json"


def test_file(classname: str) -> str | None:
    """`tests.e2e.test_ray` or `tests.unit.test_x.TestCase` -> the test file's path, if it exists."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / path).is_file():
            return path.as_posix()
    return None


def file_costs(junit_xml: Path) -> dict[str, float]:
    """Seconds per test file: the sum of its test cases' times (setup, call and teardown)."""
    costs: dict[str, float] = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        path = test_file(case.get("classname", ""))
        if path is not None:
            costs[path] = costs.get(path, 0.0) + float(case.get("time") or 0.0)
    return {path: round(seconds, 1) for path, seconds in sorted(costs.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    costs = file_costs(Path(sys.argv[1]))
    COSTS.write_text(json.dumps(costs, indent=1) + "\n")
    print(f"{COSTS.relative_to(ROOT)}: {len(costs)} files, {sum(costs.values()):.0f} s in all")
