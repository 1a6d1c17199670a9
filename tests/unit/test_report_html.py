"""The written report: self-contained HTML with escaped values, PNGs, summary.md, results.csv."""

from __future__ import annotations

import base64
import csv
import json
import struct
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from bench_cli import in_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, sample_sweep, scaling_records  # noqa: E402

from reports.report.build import build_report  # noqa: E402

SCRIPT = "<script>alert(1)</script>"


class Page(HTMLParser):
    """Collects tags with attributes and table rows (cell texts, row class) of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.rows: list[tuple[str, list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "tr":
            self.rows.append((attributes.get("class", ""), []))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def named(self, tag):
        return [attrs for name, attrs in self.tags if name == tag]

    def row_starting(self, *cells):
        matches = [(css, row) for css, row in self.rows if row[: len(cells)] == list(cells)]
        assert len(matches) == 1, f"expected one row starting {cells}, found {len(matches)}"
        return matches[0]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    page = build_report(
        sample_sweep(),
        out,
        title="unit sweep",
        reproduce=["fsdp-bench sweep experiment=unit"],
        problems=[("results/x/result.json", "unknown schema_version 99")],
    )
    return out, page, Page(page.read_text())


def test_writes_every_output_file(report):
    out, page, _ = report
    assert page == out / "report.html"
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "efficiency.png",
        "memory.png",
        "mfu.png",
        "report.html",
        "results.csv",
        "step_times.png",
        "summary.md",
        "throughput.png",
        "tokens_per_device.png",
    ]


def test_error_text_with_script_is_escaped_not_executed(report):
    _, page, parsed = report
    assert parsed.named("script") == []
    assert SCRIPT not in page.read_text()
    point = make_record(nodes=8, strategy="full_shard", status="failed").point_id
    _, row = parsed.row_starting("unit", point, "debug")  # the failed-points table
    assert row[5:7] == ["failed", f"rank 3: {SCRIPT}"]  # shown verbatim as text


def test_page_is_self_contained(report):
    out, _, parsed = report
    images = parsed.named("img")
    assert len(images) == 6
    for image in images:
        prefix = "data:image/png;base64,"
        assert image["src"].startswith(prefix)
        png = base64.b64decode(image["src"][len(prefix) :])
        width, height = struct.unpack(">II", png[16:24])  # PNG IHDR: width, height
        assert (width, height) == (int(image["width"]), int(image["height"])) and width > 0
    embedded = {base64.b64decode(i["src"].split(",", 1)[1]) for i in images}
    assert embedded == {p.read_bytes() for p in out.glob("*.png")}
    linked = [v for _, attrs in parsed.tags for k, v in attrs.items() if k in ("src", "href") and v]
    assert all(v.startswith("data:") for v in linked)
    csp = [m for m in parsed.named("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]["content"]


def test_header_names_sweep_and_environment(report):
    _, _, parsed = report
    assert parsed.row_starting("torch")[1] == ["torch", "2.13.0"]
    assert parsed.row_starting("hosts")[1] == ["hosts", "host-a"]
    assert parsed.row_starting("points")[1] == ["points", "6 ok, 1 oom, 1 failed"]
    title = [t for t in parsed.tags if t[0] == "title"]
    assert title


def test_headline_best_configuration_per_model_and_node_count(report):
    _, _, parsed = report
    _, one = parsed.row_starting("debug", "1")
    assert one[2].startswith("no_shard") and one[3] == "1,100" and one[7] == "45.5 % at 4"
    _, two = parsed.row_starting("debug", "2")
    assert two[2].startswith("full_shard") and two[3:7] == ["1,900", "950", "41.0 %", "95.0 %"]
    assert two[7] == "85.0 % at 4"


def test_failed_points_listed_with_status_reason_and_rerun_command(report):
    _, _, parsed = report
    oom_id = make_record(nodes=8, strategy="no_shard", status="oom").point_id
    _, row = parsed.row_starting("unit", oom_id, "debug")
    assert row[4:7] == ["8", "oom", "CUDA out of memory"]
    assert row[7].startswith("fsdp-bench run model=debug nodes=8 gpus_per_node=1 strategy=no_shard")
    assert row[7].endswith("sweep.name=unit")


def test_unreadable_records_and_reproduce_block(report):
    _, page, parsed = report
    assert parsed.row_starting("results/x/result.json")[1] == ["results/x/result.json", "unknown schema_version 99"]
    text = page.read_text()
    reproduce = text[text.index('id="reproduce"') :]
    assert "fsdp-bench sweep experiment=unit\n# each configuration alone:\nfsdp-bench run model=debug" in reproduce


def test_results_csv_has_one_row_per_point_with_efficiency(report):
    out, _, _ = report
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 8
    two = [r for r in rows if r["strategy"] == "full_shard" and r["nodes"] == "2"][0]
    assert float(two["tokens_per_s"]) == 1900.0
    assert float(two["scaling_efficiency"]) == pytest.approx(0.95)
    assert two["scaling_mode"] == "weak" and float(two["baseline_nodes"]) == 1
    assert "step_times_s" not in rows[0]


def test_results_csv_bytes_are_what_pandas_to_csv_writes(tmp_path):
    """write_csv formats cells itself (faster); every kind of column must come out as pandas writes it."""
    import numpy as np
    import pandas as pd

    from bench.analysis.report.export import write_csv

    frame = pd.DataFrame(
        {
            "float": [0.1, np.nan, 1e16, -0.0, np.inf, 1e-05],
            "int": [1, 2, 3, 4, 5, 6],
            "flag": [True, False] * 3,
            "text": pd.Series(["a", "b,c", None, 'q"x', "", "é"]),
            "object": pd.Series([None, [1, 2], "x", 3.5, np.float64(2.5), np.nan], dtype=object),
            "nullable": pd.Series([1, None, 3, 4, 5, 6], dtype="Int64"),
            "nullable_float": pd.Series([1.5, None, 3, 4, 5, 6], dtype="Float64"),
            "category": pd.Series(["a", "b", "a", "b", "a", None]).astype("category"),
        }
    )
    for columns in (["float", "int", "flag", "text", "object", "nullable", "nullable_float"], list(frame.columns)):
        frame[columns].to_csv(tmp_path / "pandas.csv", index=False)
        written = write_csv(frame[columns], tmp_path / "results.csv").read_bytes()
        assert written == (tmp_path / "pandas.csv").read_bytes()
    assert written.splitlines()[1:3] == [b"0.1,1,True,a,,1,1.5,a", b',2,False,"b,c","[1, 2]",,,b']


def test_results_csv_is_the_file_pandas_writes_whatever_the_cells_hold(tmp_path):
    """Commas, quotes, line ends, empty texts, NaN, -0.0, nullable integers: write_csv writes the bytes of
    `to_csv(index=False)`, and leaves the list columns (per-step times) out."""
    import numpy as np
    import pandas as pd

    from bench.analysis.report.export import write_csv

    frame = pd.DataFrame(
        {
            "error": pd.Series(["out of\nmemory", None, 'a "b", c', "", "x\r\ny"]),
            "nodes": [1, 2, 4, 8, 16],
            "step_times_s": [[0.1], [], [0.2, 0.3], [0.4], [0.5]],  # not a column of results.csv
            "tokens_per_s": [1.5, np.nan, 1e16, -0.0, 2.0],
            "series": pd.Series([0, None, 1, 1, 2], dtype="Int64"),
            "contention": pd.Series([None, "", "loaded, host", None, "z"], dtype=object),
        }
    )
    frame.drop(columns=["step_times_s"]).to_csv(tmp_path / "pandas.csv", index=False)
    assert write_csv(frame, tmp_path / "results.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()


def test_summary_md_escapes_and_reports_headline(report):
    out, _, _ = report
    text = (out / "summary.md").read_text()
    assert text.startswith("# unit sweep\n")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert (
        "| debug | 2 | full_shard · fp32 · batch 1/dev · seq 64 | 1,900 | 950 | 41.0 % | 95.0 % | 85.0 % at 4 |" in text
    )
    assert "## Failed and skipped points (2)" in text


def test_prediction_columns_and_flag_only_when_predictions_exist(tmp_path):
    plain = Page(build_report(scaling_records({1: 1000.0, 2: 1900.0}), tmp_path / "a").read_text())
    assert not any("predicted efficiency" in row for _, row in plain.rows)
    predicted = {
        "scaling_efficiency": 0.95,
        "tokens_per_s_per_device": 980.0,
        "step_time_s": 0.07,
        "memory_bytes_per_device": {"total": 3 * 2**30},
    }
    records = [
        make_record(nodes=1, tokens_per_s=1000.0, prediction={**predicted, "scaling_efficiency": 1.0}),
        make_record(nodes=2, tokens_per_s=1500.0, prediction=predicted),
    ]
    page = Page(build_report(records, tmp_path / "b").read_text())
    header = [row for _, row in page.rows if "predicted efficiency" in row and "sweep" in row][0]
    css, row = page.row_starting("unit", records[1].point_id)
    cells = dict(zip(header, row, strict=True))
    assert css == "flag"
    assert cells["efficiency"] == "75.0 % (weak, vs 1)"
    assert cells["predicted efficiency"] == "95.0 %"
    assert cells["predicted tokens/s per device"] == "980"
    assert cells["predicted mem/device (GiB)"] == "3.00"
    assert cells["check"] == "below prediction"
    assert page.row_starting("unit", records[0].point_id)[0] == ""
    summary = (tmp_path / "b" / "summary.md").read_text()
    assert "1 point(s) scaled more than 10 points below the planner's prediction." in summary


def test_report_of_failures_only_still_renders(tmp_path):
    records = [make_record(nodes=1, status="failed", error="boom", tokens_per_s=None)]
    page = Page(build_report(records, tmp_path).read_text())
    assert sorted(p.name for p in tmp_path.glob("*.png")) == []
    assert page.row_starting("unit", records[0].point_id, "debug")[1][5:7] == ["failed", "boom"]
    assert "No point finished ok: nothing to rank." in (tmp_path / "report.html").read_text()


def _write(records, root: Path) -> None:
    from bench.analysis.records import write_record

    for record in records:
        write_record(record, root / record.sweep / record.point_id / "result.json")


def test_cli_report_from_folder_and_exit_codes(tmp_path):
    results = tmp_path / "results"
    _write(sample_sweep(), results)
    bad = results / "unit" / "zz-bad" / "result.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"schema_version": 99, "point_id": "x"}))
    captured = in_process("report", results, "-o", tmp_path / "out")
    assert captured.rc == 0, captured.stderr
    assert "report: skipped" in captured.stderr and "schema_version 99 is unknown" in captured.stderr
    assert "(8 points: 6 ok, 2 not ok)" in captured.stdout
    assert {"report.html", "results.csv", "summary.md", "throughput.png"} <= {
        p.name for p in (tmp_path / "out").iterdir()
    }
    # The capacity comes from the record's own cluster facts (local-cpu: 16 GiB).
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert {float(r["device_memory_bytes"]) for r in rows} == {16 * 2**30}
    assert in_process("report", tmp_path / "missing").rc == 2
    unreadable = in_process("report", bad.parent)
    assert unreadable.rc == 2
    assert "no readable result records" in unreadable.stderr


def test_cli_report_from_store(tmp_path):
    from bench.analysis.store import SQLiteStore

    store = SQLiteStore(tmp_path / "results.sqlite")
    store.ingest(sample_sweep())
    assert in_process("report", tmp_path / "results.sqlite", "-o", tmp_path / "out").rc == 0
    assert len(list(csv.DictReader((tmp_path / "out" / "results.csv").open()))) == 8
    junk = tmp_path / "junk.txt"
    junk.write_text("not a store")
    assert in_process("report", junk, "-o", tmp_path / "out2").rc == 2


def test_table_html_writes_what_the_jinja_loop_over_the_cells_wrote():
    """html.table_html replaced a Jinja loop over every cell (slow at 10,000 rows): the same text,
    every header, cell and row class escaped, empty tables included."""
    from jinja2 import Environment
    from markupsafe import Markup

    from reports.report.html import rows_written, table_html
    from reports.report.tables import Table

    loop = Environment(autoescape=True).from_string(
        '<table class="{{ css }}">\n  <thead><tr>{% for c in t.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead>\n'
        "  <tbody>\n  {%- for row in t.rows %}\n    <tr{% if t.row_classes[loop.index0] %} "
        'class="{{ t.row_classes[loop.index0] }}"{% endif %}>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}'
        "</tr>\n  {%- endfor %}\n  </tbody>\n</table>"
    )
    table = Table(["a & b", "<c>"])
    table.add([SCRIPT, "1,234"], "flag")
    table.add(['"quoted"', "–"])
    table.add([], 'odd "class"')
    table.add(["", "'"])
    # The cells are escaped in one call with stand-in characters between them; cells that hold a
    # stand-in, or are not plain strings (Markup is not escaped again), take the cell-by-cell way.
    odd = Table(["x", "y"], [["a\x1fb", "c\x1e"], ["<i>", "&"]], ["", "flag"])
    objects = Table(["x", "y"], [[Markup("<b>ok</b>"), 3], ["<", None]], ["", ""])
    for t, css in ((table, "wide"), (Table(["only"]), ""), (odd, ""), (objects, "")):
        assert str(table_html(t, css)) == loop.render(t=t, css=css)
    assert "<td>a\x1fb</td><td>c\x1e</td>" in table_html(odd) and "<td><b>ok</b></td><td>3</td>" in table_html(objects)
    assert "&lt;script&gt;" in table_html(table) and '<tr class="flag">' in table_html(table)
    # Rows written ahead (while a worker pool draws the figures) are placed as table_html writes them.
    written = rows_written({"t": table, "odd": odd, "objects": objects, "n": 3, "s": "text"})
    assert {key: type(value).__name__ for key, value in written.items()} == {
        "t": "RowsWritten", "odd": "RowsWritten", "objects": "RowsWritten", "n": "int", "s": "str"
    }  # fmt: skip
    for key, t in (("t", table), ("odd", odd), ("objects", objects)):
        assert str(table_html(written[key], "wide")) == str(table_html(t, "wide"))
        assert (written[key].columns, written[key].rows, written[key].row_classes) == (t.columns, t.rows, t.row_classes)
