"""The check as JUnit XML: one testcase per (point, metric), so CI systems show each regression.

A failing finding is a <failure>; a finding that cannot be judged (too few samples, a point
only one side has) is <skipped>; everything else passes with its numbers in <system-out>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from bench.analysis.check.compare import NOT_GATED, CheckReport, Finding
from bench.schema.files import atomic_path
from reports.check.table import finding_row

SUITE_NAME = "fsdp-bench check"
_SKIPPED = {"insufficient", "new", "no baseline curve", NOT_GATED}


def _testcase(finding: Finding) -> ET.Element:
    case = ET.Element("testcase", classname=finding.point, name=finding.metric)
    text = "baseline={2} current={3} change={4} verdict={5} {6}".format(*finding_row(finding)).strip()
    if finding.fails:
        failure = ET.SubElement(
            case, "failure", message=f"{finding.metric} {finding.verdict}: {text}", type=finding.verdict
        )
        failure.text = text
    elif finding.verdict in _SKIPPED:
        hint = f" ({finding.hint})" if finding.hint else ""
        ET.SubElement(case, "skipped", message=f"{finding.verdict}: {text}{hint}")
    else:
        ET.SubElement(case, "system-out").text = text
    return case


def build_junit(report: CheckReport, suite_name: str = SUITE_NAME) -> ET.ElementTree:
    """The report as a <testsuites> tree with one <testsuite> (`fsdp-bench history` names its own)."""
    cases = [_testcase(f) for f in report.findings]
    for label in report.only_in_baseline:
        case = ET.Element("testcase", classname=label, name="point")
        ET.SubElement(case, "skipped", message="in the baseline but not in the current results")
        cases.append(case)
    failures = sum(1 for c in cases if c.find("failure") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    root = ET.Element("testsuites", name=suite_name, tests=str(len(cases)), failures=str(failures))
    suite = ET.SubElement(
        root,
        "testsuite",
        name=suite_name,
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    if report.env_lines:
        ET.SubElement(suite, "system-err").text = "\n".join(report.env_lines)
    suite.extend(cases)
    return ET.ElementTree(root)


def write_junit(report: CheckReport, path: Path, suite_name: str = SUITE_NAME) -> None:
    """Write the JUnit XML file (parents created)."""
    tree = build_junit(report, suite_name)
    ET.indent(tree)
    with atomic_path(path) as tmp:
        tree.write(tmp, encoding="utf-8", xml_declaration=True)
