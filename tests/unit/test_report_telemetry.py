"""The report's telemetry: the table and its flags, the timelines read from real sidecars, energy per
token against nodes, and what the page says when something is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
sys.path.insert(0, str(FIXTURES))
from record_factory import scaling_records  # noqa: E402

from bench.analysis.records import load_located_records  # noqa: E402
from bench.analysis.report.views import analyse  # noqa: E402
from bench.schema.telemetry import Telemetry  # noqa: E402
from reports.report import plots  # noqa: E402
from reports.report import telemetry as view  # noqa: E402
from reports.report.build import build_report  # noqa: E402

TELEMETRY_DIR = FIXTURES / "telemetry"  # a real 2-"node" CPU sweep with its sidecars (README.md there)


@pytest.fixture(scope="module")
def located():
    located, problems = load_located_records(TELEMETRY_DIR)
    assert problems == [] and len(located) == 2
    return [r for r, _ in located], {(r.sweep, r.point_id): p.parent for r, p in located}


def test_real_sidecars_become_one_timeline_row_per_point(located):
    records, dirs = located
    points = analyse(records).points
    timelines = view.load_timelines(points, dirs)
    assert len(timelines) == 2
    fig = view.timeline_figure(points, timelines)
    assert len(fig.axes) == 2 * len(view.PANELS)
    titles = [ax.get_title() for ax in fig.axes[:4]]
    assert titles == ["utilization (%)", "power (W)", "memory (GiB)", "network (MB/s)"]
    for row, index in enumerate(view.timeline_rows(points, timelines)):
        series = timelines[index]
        util, power, memory, network = fig.axes[4 * row : 4 * row + 4]
        ranks = sorted(series["rank"].unique())
        assert [line.get_label() for line in util.get_lines()] == [f"rank {r}" for r in ranks]
        first = util.get_lines()[0]
        expected = series[series["rank"] == ranks[0]]
        np.testing.assert_allclose(first.get_xdata(), expected["t_s"])
        assert power.get_lines() == [] and power.texts[0].get_text() == "not measured on this device or host"
        rss = memory.get_lines()[0].get_ydata()
        np.testing.assert_allclose(rss, expected["proc_rss_bytes"] / 2**30)  # CPU: the rank's resident memory
        assert [line.get_label() for line in network.get_lines()] == [
            f"{series['host'].iloc[0]} sent",
            f"{series['host'].iloc[0]} received",
        ]


def test_the_page_shows_the_telemetry_table_timelines_and_why_energy_is_missing(located, tmp_path):
    records, dirs = located
    page = build_report(records, tmp_path, point_dirs=dirs)
    html = page.read_text()
    assert (tmp_path / "telemetry.png").stat().st_size > 10_000
    start = html.index('<section id="telemetry">')
    section = html[start : html.index("</section>", start)]
    assert 'id="fig-telemetry"' in section
    for record in records:
        assert f"<td>{record.point_id}</td>" in section
        util = record.metrics.telemetry.util_pct
        assert f"<td>{util:.1f} %</td>" in section
    assert "Energy per token not measured: CPU: no RAPL package energy" in section
    assert "Energy per token is not plotted" in html  # no energy figure beside the scaling plots on this CPU


def test_a_store_has_no_sidecars_so_the_page_says_where_timelines_come_from(located, tmp_path):
    records, _ = located
    html = build_report(records, tmp_path).read_text()
    assert 'id="fig-telemetry"' not in html and not (tmp_path / "telemetry.png").exists()
    assert "No timelines: they are drawn from the series next to each result.json" in html


def _with(record, **fields):
    telemetry = record.metrics.telemetry or Telemetry(window_s=1.0, ranks=record.spec.world_size, samples=10)
    return record.model_copy(
        update={"metrics": record.metrics.model_copy(update={"telemetry": telemetry.model_copy(update=fields)})}
    )


def test_energy_per_token_against_nodes_and_the_flags():
    records = [
        _with(r, energy_per_token_j=0.5 * r.spec.nodes, util_pct=90.0, throttle_fraction=0.2 if r.spec.nodes == 4 else 0.0,
              idle_devices=1 if r.spec.nodes == 2 else 0, energy_source="gpu")
        for r in scaling_records({1: 1000.0, 2: 1900.0, 4: 3400.0})
    ]  # fmt: skip
    analysis = analyse(records)
    (ax,) = plots.energy_figure(analysis.scaling).axes
    assert ax.get_ylabel() == "energy per token (J)"
    for line in ax.get_lines():
        if (line.get_gid() or "").startswith("series:"):
            np.testing.assert_allclose(line.get_ydata(), 0.5 * np.asarray(line.get_xdata()))
    table = view.telemetry_table(analysis.points)
    flags = {row[4]: row[-1] for row in table.rows}
    assert flags["4"] == "throttled in 20 % of samples" and flags["2"] == "1 device(s) mostly idle" and flags["1"] == ""
    assert [css for row, css in zip(table.rows, table.row_classes) if row[4] == "4"] == ["flag"] * sum(
        row[4] == "4" for row in table.rows
    )
    flagged_only = view.telemetry_table(analysis.points, only_flagged=True)
    assert {row[4] for row in flagged_only.rows} == {"2", "4"}


def test_many_ranks_collapse_into_their_mean_and_range():
    frame = pd.DataFrame(
        {"rank": np.repeat(np.arange(12), 5), "host": "h", "t_s": np.tile(np.arange(5) * 0.1, 12),
         "util_pct": np.repeat(np.arange(12) * 5.0, 5)}
    )  # fmt: skip
    points = pd.DataFrame([{"model": "m", "strategy": "full_shard", "precision": "fp32", "micro_batch": 1,
                            "grad_accum": 1, "seq_len": 32, "nodes": 2, "point_id": "p", "throttle_fraction": None,
                            "idle_devices": 0}])  # fmt: skip
    fig = view.timeline_figure(points, {0: frame})
    util = fig.axes[0]
    (mean,) = util.get_lines()
    assert mean.get_label() == "mean of 12"
    np.testing.assert_allclose(mean.get_ydata(), 27.5)
    assert len(util.collections) == 1  # the min-max band
