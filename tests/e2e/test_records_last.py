"""Records last: real records of schema version 1 read, report and check exactly as they did.

tests/fixtures/records/v1/ holds real records written by the version-1 engine (a small sweep with
repeats, mixed precisions and overrides, a failure, an out-of-memory point, a compiled point and
two planner-skipped points; see tests/fixtures/records/README.md), and v1_baseline.json a baseline
saved from them. v1_expected.json is what `fsdp-bench report` and `fsdp-bench check` made of them
with the version-1 code: the tests compare today's output with it, field by field.

Regenerate the expectation only on purpose (a deliberate change of what the report or the check
computes), with the version of the code whose output is to be pinned:
    python tests/e2e/test_records_last.py --write
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `--write` run as a script
from bench_cli import in_process  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
V1 = FIXTURES / "v1"
V1_BASELINE = FIXTURES / "v1_baseline.json"
EXPECTED = FIXTURES / "v1_expected.json"


# A check label names a point by its model, world shape, strategy and precision, then details that
# have grown over versions (micro-batch, sequence) and "#<identity key>", which changes with the
# identity's encoding: the pinned output compares the first four words.
def _label_core(label: str) -> str:
    return " ".join(label.split()[:4])


def report_rows(out: Path) -> list[dict[str, str]]:
    report = in_process("report", V1, "-o", out)
    assert report.rc == 0, report.stderr
    with open(out / "results.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _case_text(case: ET.Element) -> str:
    skipped = case.find("skipped")
    return (case.findtext("system-out") or (skipped.get("message") if skipped is not None else "") or "").strip()


def check_findings(current: Path, baseline: Path, junit: Path) -> dict:
    proc = in_process("check", current, "--baseline", baseline, "--junit", junit)
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    # The numerics guard (loss curves) came after version 1: its cases are checked on their own.
    # A timing row the runs' noise could not gate is a <skipped> case: its message is its text.
    findings = sorted(
        (_label_core(case.get("classname")), case.get("name"), _case_text(case))
        for case in cases
        if case.get("name") != "loss_curve"
    )
    curves = sorted(
        (_label_core(case.get("classname")), (case.findtext("system-out") or case.find("skipped").get("message")))
        for case in cases
        if case.get("name") == "loss_curve"
    )
    return {"exit_code": proc.rc, "findings": [list(f) for f in findings], "loss_curves": curves}


def snapshot() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        return {
            "report_csv": report_rows(tmp / "report"),
            "check_against_baseline": check_findings(V1 / "v1_scaling", V1_BASELINE, tmp / "a.xml"),
            "check_against_itself": check_findings(V1, V1, tmp / "b.xml"),
        }


def test_v1_records_report_and_check_as_they_did():
    expected, actual = json.loads(EXPECTED.read_text()), snapshot()
    against_baseline, against_itself = actual["check_against_baseline"], actual["check_against_itself"]
    # The version-1 baseline keeps no loss curves; the records do, and match themselves exactly.
    no_curve = "no baseline curve: baseline=- current=- change=- verdict=no baseline curve (no baseline curve (the"
    assert {text.partition(" baseline keeps")[0] for _, text in against_baseline.pop("loss_curves")} == {no_curve}
    curves = against_itself.pop("loss_curves")
    assert len(curves) == 9 and all(text.endswith("verdict=ok loss curve matches (exact)") for _, text in curves)
    assert against_baseline == expected["check_against_baseline"]
    assert against_itself == expected["check_against_itself"]
    assert len(actual["report_csv"]) == len(expected["report_csv"]) == 19
    for got, want in zip(actual["report_csv"], expected["report_csv"], strict=True):
        # Columns added since are empty for these records, but a new column of the planner's prediction
        # (pred_*), which reads what the records' stored prediction always held; every column they had
        # keeps its value.
        added = {k for k in set(got) - set(want) if not k.startswith("pred_")}
        assert all(got[k] == "" for k in added), {k: got[k] for k in added if got[k]}
        assert {k: got.get(k) for k in want} == want, {k: (got.get(k), want[k]) for k in want if got.get(k) != want[k]}


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        EXPECTED.write_text(json.dumps(snapshot(), indent=1) + "\n")
        print(f"wrote {EXPECTED}")


def test_records_whose_presets_were_renamed_or_never_existed_still_report_and_check(tmp_path):
    """A version-2 record names presets today's registry lacks; a version-1 record names a model
    version 1's tables never had (a locally edited package): both read, report and check."""
    source = next((V1 / "v1_scaling").rglob("result.json"))
    v1 = json.loads(source.read_text())
    renamed_v1 = {**v1, "spec": {**v1["spec"], "model": "debug-renamed"}}
    renamed_v2 = json.loads(source.read_text())
    from bench.analysis.records import parse_record

    record = parse_record(renamed_v2).model_dump(mode="json")
    record["spec"]["model"]["name"] = "our-renamed-model"
    record["spec"]["cluster"]["name"] = "our-renamed-cluster"
    record["point_id"] = "0123456789ab"  # another point than the v1 one (a report keeps one record per id)
    results = tmp_path / "results" / "renamed"
    for name, data in {"a": renamed_v1, "b": record}.items():
        (results / name).mkdir(parents=True)
        (results / name / "result.json").write_text(json.dumps(data))
    rebuilt = parse_record(renamed_v1)
    assert rebuilt.spec.model.dim == 64 and "not in version 1's tables" in rebuilt.notes["model"]
    report = in_process("report", results, "-o", tmp_path / "report")
    assert report.rc == 0 and "(2 points: 2 ok, 0 not ok)" in report.stdout, report.stderr
    rows = {row["model"]: row for row in csv.DictReader(open(tmp_path / "report" / "results.csv"))}
    assert set(rows) == {"debug-renamed", "our-renamed-model"}
    assert rows["our-renamed-model"]["cluster"] == "our-renamed-cluster"
    check = in_process("check", results, "--baseline", results)
    assert check.rc == 0, check.stdout + check.stderr


def test_records_of_the_old_selective_read_back_as_selective_layer_with_their_ids(tmp_path):
    """Before the split into selective_op and selective_layer, `selective` meant every second block.
    Such a record reads back as selective_layer with ac_every 2, keeps its point id, and reports and
    checks against a baseline as the same point."""
    import hashlib

    from bench.analysis.records import parse_record, read_record
    from bench.schema.spec import RunSpec

    source = next((V1 / "v1_scaling").rglob("result.json"))
    record = parse_record(json.loads(source.read_text())).model_dump(mode="json")
    for later in ("ac_every", "ac_save_ops"):  # fields written only since the split
        del record["spec"]["train"][later]
    # The id the code before the split gave it: its identity (the same as today's for mode none,
    # which no checkpointing field enters) with the old name.
    identity = RunSpec.model_validate(record["spec"]).identity()
    identity["train"]["activation_checkpointing"] = "selective"
    old_id = hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]
    record["spec"]["train"]["activation_checkpointing"] = "selective"
    record["point_id"] = old_id
    results = tmp_path / "results"
    (results / "old" / old_id).mkdir(parents=True)
    (results / "old" / old_id / "result.json").write_text(json.dumps(record))

    read = read_record(results / "old" / old_id / "result.json")
    assert (read.spec.train.activation_checkpointing, read.spec.train.ac_every) == ("selective_layer", 2)
    assert read.spec.point_id == read.point_id == old_id

    assert in_process("report", results, "-o", tmp_path / "report").rc == 0
    rows = list(csv.DictReader(open(tmp_path / "report" / "results.csv")))
    assert [(r["point_id"], r["activation_checkpointing"]) for r in rows] == [(old_id, "selective_layer")]
    baseline = tmp_path / "base.json"
    assert in_process("baseline", "save", results, "-o", baseline).rc == 0
    assert json.loads(baseline.read_text())["points"][0]["identity"]["train"]["activation_checkpointing"] == "selective"
    junit = tmp_path / "check.xml"
    assert in_process("check", results, "--baseline", baseline, "--junit", junit).rc == 0
    names = {case.get("name") for case in ET.parse(junit).getroot().iter("testcase")}
    assert "missing" not in " ".join(names) and names, names
