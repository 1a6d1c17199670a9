"""The pipelines of ci/ run on CPU: their shell steps in order (tests/ci_runner.py), the nightly once.

The nightly (ci/nightly.sh) sweeps a one-point, one-rank `debug` grid (cpu_smoke's full_shard fp32
point at one node), adds it to a store, runs history's gate, checks it against the committed
cpu_smoke baseline (counters: `--no-gate-timings`, as this project's own CI does) and renders the
report: nothing mocked. Each pipeline's glue must hand the script the same inputs, and name for
upload and JUnit only files the run wrote. Bad input: one line naming the variable, exit 2, nothing
written.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ci_runner import INPUTS, NIGHTLY, REPO, RUNNERS, base_environment, scrontab_entry

from bench.analysis.store import open_existing

BASELINE = REPO / "baselines" / "cpu_smoke.json"
ONE_POINT = "experiment=cpu_smoke sweep.grid.nodes=1 sweep.grid.strategy=full_shard sweep.grid.precision=fp32"


def _settings(root: Path) -> dict[str, str]:
    """What a CI owner enters (repository variables, CI/CD variables, the scrontab's lines)."""
    (root / "store").mkdir(parents=True)
    return {
        "FSDP_BENCH_STORE": str(root / "store" / "fsdp-bench.sqlite"),
        "FSDP_BENCH_BASELINE": str(BASELINE),
        "FSDP_BENCH_OVERRIDES": ONE_POINT,
        "FSDP_BENCH_REPEATS": "1",
        "FSDP_BENCH_CHECK_ARGS": "--no-gate-timings",
    }


@pytest.fixture(scope="module")
def nightly_pipelines(tmp_path_factory):
    """Every pipeline run: GitHub's runs the nightly, the others replay its outputs."""
    root = tmp_path_factory.mktemp("ci")
    settings = _settings(root)
    first = RUNNERS["github"](root / "github", settings)
    assert first.nightly_rc is not None, first.output
    out = first.checkout / first.inputs.get("FSDP_BENCH_OUT", "nightly")
    runs = {"github": first}
    for name in ("gitlab", "slurm"):
        runs[name] = RUNNERS[name](root / name, settings, replay=(out, first.nightly_rc))
    return settings, runs


@pytest.mark.ranks
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_nightly_sweeps_stores_follows_checks_and_reports(nightly_pipelines):
    _, runs = nightly_pipelines
    github = runs["github"]
    assert github.exit_codes == [0, 0, 0], github.output
    out = github.checkout / "nightly"
    assert open_existing(Path(github.inputs["FSDP_BENCH_STORE"])).count() == 1
    (results,) = (out / "results").iterdir()
    assert len(list(results.rglob("result.json"))) == 1
    history = ET.parse(out / "history" / "history.xml").getroot().find("testsuite")
    assert (history.get("tests"), history.get("failures"), history.get("skipped")) == ("1", "0", "1")
    check = ET.parse(out / "check" / "check.xml").getroot().find("testsuite")
    assert check.get("failures") == "0" and int(check.get("tests")) > 0
    assert (out / "report" / "report.html").is_file()
    assert sorted(p.stem for p in (out / "logs").iterdir()) == ["check", "history", "report", "store", "sweep"]
    summary = (github.checkout.parent / "step_summary.md").read_text()
    assert "## fsdp-bench history: PASS (1 series (0 tested, 1 too short)" in summary
    assert "## fsdp-bench check: PASS (1 point(s) compared" in summary


@pytest.mark.ranks
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_pipeline_hands_the_nightly_the_same_inputs(nightly_pipelines):
    settings, runs = nightly_pipelines
    expected = {name: settings.get(name, "") for name in INPUTS}  # unset and empty: the script's default
    for name, run in runs.items():
        assert run.nightly_rc == 0 and not any(run.exit_codes), (name, run.output)
        handed = {key: run.inputs.get(key, "") for key in INPUTS}
        assert handed == expected, name


@pytest.mark.ranks
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_uploads_and_junit_reports_name_what_the_nightly_wrote(nightly_pipelines):
    _, runs = nightly_pipelines
    for name in ("github", "gitlab"):
        run = runs[name]
        assert run.uploads and run.junit, name
        for path in run.uploads:
            assert (run.checkout / path).is_dir() and any((run.checkout / path).iterdir()), (name, path)
        for path in run.junit:
            assert ET.parse(run.checkout / path).getroot().tag == "testsuites", (name, path)
    slurm = runs["slurm"]
    (dated,) = (Path(slurm.inputs["FSDP_BENCH_STORE"]).parent / "nightly").iterdir()
    assert Path(slurm.inputs["FSDP_BENCH_OUT"]) == dated
    assert (dated / "history" / "history.html").is_file() and (dated / "check" / "check.xml").is_file()
    variables, options, command = scrontab_entry()
    assert command.endswith("ci/slurm-nightly.sh") and "--time=04:00:00" in options
    assert {"FSDP_BENCH_STORE", "FSDP_BENCH_BASELINE", "FSDP_BENCH_OVERRIDES"} <= set(variables)


def _nightly(tmp_path: Path, how: list[str], **inputs: str) -> subprocess.CompletedProcess:
    env = base_environment() | inputs
    return subprocess.run([*how], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


VALID = {
    "FSDP_BENCH_STORE": "TMP/store.sqlite",  # TMP: the test's folder
    "FSDP_BENCH_BASELINE": str(BASELINE),
    "FSDP_BENCH_OVERRIDES": ONE_POINT,
}


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"FSDP_BENCH_STORE": None}, "error: FSDP_BENCH_STORE: not set;"),
        ({"FSDP_BENCH_BASELINE": ""}, "error: FSDP_BENCH_BASELINE: not set;"),
        ({"FSDP_BENCH_OVERRIDES": None}, "error: FSDP_BENCH_OVERRIDES: not set;"),
        ({"FSDP_BENCH_BASELINE": "missing.json"}, "error: FSDP_BENCH_BASELINE: missing.json does not exist"),
        ({"FSDP_BENCH_STORE": "TMP/no/such/s.sqlite"}, "error: FSDP_BENCH_STORE: its folder TMP/no/such does not exist"),
        ({"FSDP_BENCH_STORE": "store.sqlite"}, "error: FSDP_BENCH_STORE: must be an absolute path"),
        ({"FSDP_BENCH_REPEATS": "0"}, "error: FSDP_BENCH_REPEATS: must be an integer >= 1, got '0'"),
        ({"FSDP_BENCH_NEW_RUNS": "x"}, "error: FSDP_BENCH_NEW_RUNS: must be an integer >= 2, got 'x'"),
    ],
    ids=[
        "store-unset", "baseline-empty", "overrides-unset", "baseline-missing", "store-folder", "store-relative",
        "repeats", "new-runs",
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_variable_and_exit_2(tmp_path, changed, named):
    inputs = {k: v.replace("TMP", str(tmp_path)) for k, v in (VALID | changed).items() if v is not None}
    named = named.replace("TMP", str(tmp_path))
    proc = _nightly(tmp_path, ["bash", str(NIGHTLY)], **inputs)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(named), proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written


# ${VAR:?} would exit 127 under `bash -c` and 2 under dash: the script's own check exits 2 however called.
@pytest.mark.parametrize("how", [["bash", "-c"], ["sh", "-c"], []], ids=["bash -c", "sh -c", "executable"])
def test_an_unset_input_exits_2_however_the_script_is_called(tmp_path, how):
    proc = _nightly(tmp_path, [*how, str(NIGHTLY)], FSDP_BENCH_BASELINE=str(BASELINE), FSDP_BENCH_OVERRIDES=ONE_POINT)
    assert (proc.returncode, proc.stderr.strip()) == (2, proc.stderr.splitlines()[0])
    assert proc.stderr.startswith("error: FSDP_BENCH_STORE: not set;")
