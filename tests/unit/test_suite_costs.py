"""The suite's file order: scripts/update_test_costs.py sums a run's JUnit XML per test file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("update_test_costs", ROOT / "scripts" / "update_test_costs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_files_cases_are_summed_classes_and_unknown_modules_mapped(tmp_path):
    xml = tmp_path / "suite.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.e2e.test_ray" name="test_a" time="60.25"/>'
        '<testcase classname="tests.e2e.test_ray" name="test_b" time="1.5"/>'
        '<testcase classname="tests.unit.test_check_stats.TestMedian" name="test_c" time="0.04"/>'
        '<testcase classname="tests.nowhere.test_gone" name="test_d" time="9"/>'
        "</testsuite></testsuites>"
    )
    costs = _script().file_costs(xml)
    assert costs == {"tests/e2e/test_ray.py": 61.8, "tests/unit/test_check_stats.py": 0.0}
    assert list(costs) == ["tests/e2e/test_ray.py", "tests/unit/test_check_stats.py"]  # costliest first


def test_the_committed_table_names_only_files_that_exist():
    costs = json.loads((ROOT / "tests" / "file_costs.json").read_text())
    assert costs and all((ROOT / path).is_file() for path in costs)
    assert all(isinstance(seconds, (int, float)) and seconds >= 0 for seconds in costs.values())


def test_the_suite_keeps_the_conftests_order_under_xdist():
    # xdist's loadfile scheduling re-sorts files by their number of tests unless told not to; the
    # order by measured cost (tests/conftest.py) only holds with --no-loadscope-reorder.
    lines = [line for line in (ROOT / "scripts" / "test.sh").read_text().splitlines() if "--dist loadfile" in line]
    assert lines and all("--no-loadscope-reorder" in line for line in lines)
