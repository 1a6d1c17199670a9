"""The numerics guard in `check`: loss curves of real records against a baseline's (bench.analysis.check.numerics).

The records are real runs (tests/fixtures/records/real); a broken run is made by changing one
loss of a copy, so the expected step and values are known.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import REAL_DIR  # noqa: E402

from bench.analysis.check.baseline import Side, build_baseline, parse_baseline  # noqa: E402
from bench.analysis.check.compare import compare  # noqa: E402
from bench.analysis.check.numerics import compare_curves, exact_rule  # noqa: E402
from bench.analysis.check.points import points_from_records  # noqa: E402
from bench.analysis.check.thresholds import Thresholds  # noqa: E402
from bench.analysis.records import load_records  # noqa: E402


@pytest.fixture(scope="module")
def record():
    records, _ = load_records(REAL_DIR)
    return next(r for r in records if r.status == "ok" and len(r.metrics.losses) >= 4)


def _with_losses(record, losses, **env):
    metrics = record.metrics.model_copy(update={"losses": losses})
    return record.model_copy(update={"metrics": metrics, "env": record.env.model_copy(update=env)})


def _numerics(base, cur, **kwargs):
    report = compare(points_from_records([base]), points_from_records([cur]), Thresholds(), **kwargs)
    return report, [f for f in report.findings if f.kind == "numerics"]


def test_an_identical_curve_passes_exactly_and_is_not_listed(record):
    from reports.check.table import hidden_line, report_rows

    report, (finding,) = _numerics(record, record)
    assert (finding.metric, finding.verdict, finding.confidence) == ("loss_curve", "ok", "loss curve matches (exact)")
    assert report.exit_code == 0
    assert all(row[1] != "loss_curve" for row in report_rows(report, compact=True))
    assert hidden_line(report).endswith("and 1 loss curve(s) matching it (not listed)")


def test_a_changed_loss_fails_and_names_the_step(record):
    losses = list(record.metrics.losses)
    losses[2] = losses[2] * (1 + 1e-7)  # the same stack on CPU: any difference is a divergence
    report, (finding,) = _numerics(record, _with_losses(record, losses))
    assert finding.verdict == "diverged" and finding.fails and report.exit_code == 1
    assert finding.confidence.startswith("loss diverged at step 2: ") and finding.confidence.endswith("(exact)")
    assert (finding.baseline, finding.current) == (record.metrics.losses[2], losses[2])


def test_another_software_stack_gets_the_relative_tolerance(record):
    close = [v * 1.005 for v in record.metrics.losses]
    far = list(record.metrics.losses)
    far[3] *= 1.05
    _, (ok,) = _numerics(record, _with_losses(record, close, torch="9.9.9"))
    assert ok.verdict == "ok" and ok.confidence == "loss curve matches (rtol 0.01)"
    _, (bad,) = _numerics(record, _with_losses(record, far, torch="9.9.9"))
    assert bad.verdict == "diverged" and "at step 3" in bad.confidence
    _, (loose,) = _numerics(record, _with_losses(record, far, torch="9.9.9"), loss_rtol=0.1)
    assert loose.verdict == "ok"


def test_a_nan_loss_fails_wherever_it_is(record):
    losses = list(record.metrics.losses)
    losses[1] = math.nan
    _, (finding,) = _numerics(record, _with_losses(record, losses))
    assert finding.verdict == "non-finite" and finding.fails
    assert finding.confidence == "non-finite loss nan at step 1"


def test_no_numerics_skips_the_guard(record):
    losses = [math.inf] * len(record.metrics.losses)
    report, findings = _numerics(record, _with_losses(record, losses), numerics=False)
    assert findings == [] and report.exit_code == 0


def test_a_baseline_keeps_the_curve_and_an_older_one_without_it_says_no_baseline_curve(record):
    side = Side(points_from_records([record]), record.env.fingerprint(), source="real")
    doc = build_baseline(side)
    assert doc["points"][0]["losses"] == record.metrics.losses
    restored = parse_baseline(doc, "base.json")
    assert restored.points[0].loss_runs == [record.metrics.losses]
    older = {**doc, "points": [{k: v for k, v in p.items() if k != "losses"} for p in doc["points"]]}
    report = compare(parse_baseline(older, "old.json").points, points_from_records([record]), Thresholds())
    (finding,) = [f for f in report.findings if f.kind == "numerics"]
    assert finding.verdict == "no baseline curve" and not finding.fails and report.exit_code == 0
    assert finding.hint.startswith("no baseline curve (the baseline keeps no loss curves")


def test_exact_only_on_cpu_with_the_same_fingerprint_and_hosts():
    env, hosts = {"torch": "2.13.0", "device_name": "cpu"}, ["vm"]
    assert exact_rule(env, dict(env), "cpu", hosts, ["vm"])
    assert not exact_rule(env, {**env, "torch": "2.12.0"}, "cpu", hosts, hosts)
    assert not exact_rule(env, dict(env), "cuda", hosts, hosts)
    assert not exact_rule(env, dict(env), "cpu", hosts, ["other"])  # another CPU may sum differently
    assert not exact_rule(env, dict(env), "cpu", [], hosts)  # a baseline file keeps no hosts
    assert compare_curves([1.0, 2.0], [1.0, 2.0, 3.0], exact=True).verdict == "ok"  # extra steps not compared
    assert compare_curves(None, [1.0], exact=True).verdict == "no baseline curve"
