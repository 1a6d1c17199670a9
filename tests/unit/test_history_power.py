"""What history's gate can detect: the noise estimate, the committed power table (a few cells
recomputed with their seed), and the `not gated` verdict on every output, on synthetic series."""

from __future__ import annotations

import json
import math
import random
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import night  # noqa: E402

from bench.analysis.history.analyse import analyse  # noqa: E402
from bench.analysis.history.power import (  # noqa: E402
    BISECTIONS,
    DETECTION_PROBABILITY,
    MAX_SHIFT,
    TABLE,
    as_fraction,
    detection_rate,
    noise,
    power_table,
    series_power,
)
from bench.analysis.history.series import build_series  # noqa: E402


def _lognormal(n: int, cv: float, seed: int, step_at: int | None = None, factor: float = 0.9) -> list[float]:
    rng = random.Random(seed)
    return [1000.0 * math.exp(rng.gauss(0.0, cv)) * (factor if step_at is not None and i >= step_at else 1.0)
            for i in range(n)]  # fmt: skip


def test_the_noise_estimate_is_the_runs_spread_and_one_bad_night_does_not_set_it():
    values = _lognormal(400, 0.03, seed=1)
    assert noise(values) == pytest.approx(0.03, rel=0.12)
    spoiled = values[:200] + [values[200] * 0.2] + values[201:]  # a night 5x slower
    assert noise(spoiled) == pytest.approx(noise(values), rel=0.03)


def test_a_step_between_segments_is_no_noise_and_short_series_have_none():
    values = [1000.0 * (1.01 if i % 2 else 0.99) for i in range(20)]
    stepped = values[:10] + [v * 0.5 for v in values[10:]]
    assert noise(stepped, [10]) == pytest.approx(noise(values))
    assert noise(values[:4]) is None  # 3 differences: unknown


def _table_cells() -> dict:
    return {(b, a): value for b, a, value in json.loads(TABLE.read_text())["cells"]}


@pytest.mark.parametrize(("before", "after"), [(4, 2), (5, 3)])
def test_a_table_cell_is_the_bisection_of_its_own_seeded_draws(before, after):
    """The committed entry is the smallest shift, at the bisection's resolution, whose detection rate
    over the cell's seeded draws reaches 95 %: recomputed at the entry and one step below it."""
    import numpy as np

    data = json.loads(TABLE.read_text())
    entry = _table_cells()[(before, after)]
    rng = np.random.default_rng([data["seed"], before, after])
    draws = rng.standard_normal((data["simulations"], before + after)).tolist()
    assert detection_rate(draws, before, entry) >= DETECTION_PROBABILITY
    assert detection_rate(draws, before, entry - MAX_SHIFT / 2**BISECTIONS) < DETECTION_PROBABILITY


def test_the_table_covers_the_window_and_more_runs_never_need_a_much_larger_shift():
    table = power_table()
    cells = _table_cells()
    assert table.lookup(20, 3) == cells[(20, 3)] and table.lookup(21, 3) == cells[(20, 3)]
    assert table.lookup(1, 3) is None and table.lookup(10, 1) is None  # below the table
    for (b, a), value in cells.items():
        more = cells.get((b, a + 2)) if a + 2 in table.runs_after else None
        if value is not None and more is not None:
            assert more < value * 1.2, (b, a)  # flat near 3.5 units of noise, seeded draws apart


def test_series_power_states_the_detectable_shift_and_the_repeats_that_would_gate_it():
    quiet, noisy = _lognormal(20, 0.01, seed=2), _lognormal(20, 0.05, seed=3)
    per_noise = power_table().lookup(17, 3)
    gated = series_power(quiet, [], window=3, target=0.10, higher_is_better=True)
    assert (gated.runs_before, gated.runs_after) == (17, 3) and gated.gated and gated.reason() == ""
    assert gated.detectable == pytest.approx(as_fraction(per_noise * gated.noise, True))
    ungated = series_power(noisy, [], window=3, target=0.10, higher_is_better=True)
    assert not ungated.gated and ungated.detectable > 0.10
    assert ungated.repeats == math.ceil((per_noise * ungated.noise / -math.log(0.9)) ** 2)
    assert f"gateable with {ungated.repeats} repeats per night" in ungated.reason()
    # pooled repeats: noise / sqrt(repeats) detects the target
    assert as_fraction(per_noise * ungated.noise / math.sqrt(ungated.repeats), True) <= 0.10
    assert series_power(noisy, [], window=3, target=0.5, higher_is_better=True).gated


def _history(values: list[float], **options):
    records = [night(i, v) for i, v in enumerate(values)]
    return analyse(build_series(records, "tokens_per_s"), metric="tokens_per_s", **options)


def test_a_noisy_series_is_listed_as_not_gated_on_every_output(tmp_path):
    """The console, summary.md, history.xml and history.html (its page, without figures)."""
    from reports.history.draw import render_page
    from reports.history.inputs import PageInputs, page_inputs
    from reports.history.outputs import markdown_summary, write_history_junit
    from reports.history.table import console_lines, verdict_line

    history = _history(_lognormal(20, 0.06, seed=4), window=3)
    (result,) = history.results
    assert history.not_gated == [result] and history.exit_code == 0
    assert verdict_line(history).startswith("PASS (1 series (1 tested, 0 too short), ")
    assert verdict_line(history).endswith("; 1 series not gated at 10%)")
    reason = result.power.reason()
    assert reason.startswith("detects >= ") and "gateable with" in reason
    console = "\n".join(console_lines(history, "s.sqlite"))
    assert f"not gated at 10% (a shift of that size would pass unseen): {result.series.label} ({reason})" in console
    assert f"not gated: {reason}" in console  # the series table's status
    assert "Not gated at 10%" in markdown_summary(history)
    page = render_page(PageInputs(page_inputs(history, store="s.sqlite", command="").context, []), [])
    assert f'<p class="note">Not gated at 10% (a shift of that size would pass unseen): {result.series.label}' in page
    write_history_junit(history, tmp_path / "h.xml")
    case = ET.parse(tmp_path / "h.xml").getroot().find("testsuite/testcase")
    assert case.find("skipped").get("message").startswith("not gated: ") and reason in case.find("skipped").get(
        "message"
    )
    failing = _history(_lognormal(20, 0.06, seed=4), window=3, fail_on_ungated=True)
    assert failing.exit_code == 1 and verdict_line(failing).startswith("FAIL: 1 series not gated (--fail-on-ungated)")
    write_history_junit(failing, tmp_path / "f.xml")
    assert ET.parse(tmp_path / "f.xml").getroot().find("testsuite/testcase/failure").get("type") == "not gated"


def test_a_quiet_series_is_gated_and_its_detectable_shift_shown():
    from reports.history.table import series_rows

    history = _history(_lognormal(20, 0.01, seed=5), window=3, fail_on_ungated=True)
    (result,) = history.results
    assert history.not_gated == [] and history.exit_code == 0 and result.power.gated
    (row,) = series_rows(history)
    assert row[7:9] == [f"{result.power.noise * 100:.1f}%", f"{result.power.detectable * 100:.1f}%"]
    assert row[-1] == "no change"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--target-shift", "150%"], "error: --target-shift '150%': expected a percentage between 0 and 100, e.g. 10%"),
        (["--target-shift", "ten"], "error: --target-shift 'ten': expected a percentage between 0 and 100, e.g. 10%"),
        (["--fail-on-ungated"], "error: --fail-on-ungated: needs --fail-on-new-regression N (the gate whose power it asks for)"),
    ],
)  # fmt: skip
def test_a_bad_target_shift_or_a_lone_fail_on_ungated_is_one_line_and_exit_2(tmp_path, args, line):
    from bench_cli import in_process

    rc, out, err, _ = in_process("history", "--store", tmp_path / "none.sqlite", "-o", tmp_path / "h", *args)
    assert (rc, out, err.strip()) == (2, "", line)
    assert not (tmp_path / "h").exists()
