"""The below-prediction flag and its likely cause (bench/analysis/report/diagnosis.py), in report.html and summary.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.report.diagnosis import COMM_CAUSE, COMPUTE_CAUSE, diagnose, is_below, likely_cause  # noqa: E402
from reports.report.build import build_report  # noqa: E402

COMM_TEXT = "below prediction; likely cause: exposed communication: check the network (EFA/InfiniBand) and NCCL"


def prediction(efficiency: float, exposed: float, overlapped: float) -> dict:
    """A planner-shaped prediction with a 1 s step; `exposed`/`overlapped` communication seconds."""
    return {
        "scaling_efficiency": efficiency,
        "tokens_per_s_per_device": 1000.0,
        "step_time_s": 1.0,
        "step_time_split_s": {"compute": 1.0 - exposed, "exposed_comm": exposed, "other": 0.0},
        "comm_time_s": {"exposed": exposed, "overlapped": overlapped},
        "memory_bytes_per_device": {"total": 2**30},
    }


def pair(tps_at_2: float, exposed: float, overlapped: float) -> list:
    """1 and 2 nodes at 1,000 tokens/s on one node; the 2-node point predicted at 95 % efficiency."""
    return [
        make_record(nodes=1, tokens_per_s=1000.0, prediction=prediction(1.0, 0.0, overlapped)),
        make_record(nodes=2, tokens_per_s=tps_at_2, prediction=prediction(0.95, exposed, overlapped)),
    ]


def report_texts(records, out: Path) -> tuple[str, str]:
    html = build_report(records, out).read_text()
    return html, (out / "summary.md").read_text()


def test_comm_heavy_point_20_points_below_names_communication(tmp_path):
    html, summary = report_texts(pair(1500.0, exposed=0.3, overlapped=0.1), tmp_path)  # 75 % vs 95 %
    assert COMM_TEXT in html
    assert html.count(COMPUTE_CAUSE) == 0
    assert "**1 point(s) scaled more than 10 points below the planner's prediction.**" in summary
    flagged_row = [line for line in summary.splitlines() if COMM_TEXT in line]
    assert len(flagged_row) == 1 and "| 75.0 % | 95.0 % |" in flagged_row[0]


def test_compute_bound_point_names_compute(tmp_path):
    html, summary = report_texts(pair(1500.0, exposed=0.0, overlapped=0.05), tmp_path)
    assert f"below prediction; likely cause: {COMPUTE_CAUSE}" in html
    assert f"below prediction; likely cause: {COMPUTE_CAUSE}" in summary
    assert COMM_CAUSE not in html and COMM_CAUSE not in summary


def test_within_10_points_no_flag(tmp_path):
    html, summary = report_texts(pair(1800.0, exposed=0.3, overlapped=0.1), tmp_path)  # 90 % vs 95 %
    assert "likely cause:" not in html and "below prediction;" not in html and 'class="flag"' not in html
    assert "below the planner's prediction" not in summary and "likely cause" not in summary


def test_diagnose_text_threshold_and_missing_values():
    assert diagnose(0.75, 0.95, 1.0, 0.4) == (
        f"scaling efficiency 20 points below prediction; likely cause: {COMM_CAUSE} "
        "(predicted: communication 40 % of the planner's step)"
    )
    assert diagnose(0.75, 0.95, 1.0, 0.1) == (
        f"scaling efficiency 20 points below prediction; likely cause: {COMPUTE_CAUSE} "
        "(predicted: communication 10 % of the planner's step)"
    )
    assert diagnose(0.75, 0.95, None, None) == "scaling efficiency 20 points below prediction"
    assert diagnose(0.86, 0.95, 1.0, 0.4) is None
    assert is_below(0.5, float("nan")) is False and is_below(None, 0.9) is False
    assert likely_cause(1.0, 0.2).startswith(COMM_CAUSE)  # the 20 % share boundary counts as communication
    assert likely_cause(0.0, 0.2) is None


def test_a_profiled_point_is_diagnosed_from_its_measured_exposed_share():
    """The measured share decides where there is one (here against a prediction that says the opposite),
    and the text says it was measured."""
    assert likely_cause(1.0, 0.4, measured_share=0.05) == (
        f"{COMPUTE_CAUSE} (measured: exposed communication 5 % of the profiled step)"
    )
    assert likely_cause(None, None, measured_share=0.31).startswith(
        COMM_CAUSE + " (measured: exposed communication 31 %"
    )
    assert "likely cause: " + COMM_CAUSE + " (measured" in diagnose(0.6, 0.95, 1.0, 0.01, measured_share=0.5)


@pytest.mark.parametrize("measured, expected", [(0.90, None), (0.80, "points below prediction")])
def test_planner_flag_reuses_the_report_logic(measured, expected):
    from bench.analysis.plan_accuracy import efficiency_flag

    flag = efficiency_flag(prediction(0.95, 0.1, 0.3), measured)
    assert flag == expected if expected is None else expected in flag and f"cause: {COMM_CAUSE} (predicted" in flag
