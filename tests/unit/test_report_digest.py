"""The report's digest of many records (bench/analysis/report/digest.py): the frame's columns plus the
few records the report shows more of; rows of consecutive shares concatenate into the rows of all,
whose digest is the digest of all, and the report built from a digest is the report built from the records."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, on_loaded_host, sample_sweep  # noqa: E402

from bench.analysis.report.columns import frame_columns  # noqa: E402
from bench.analysis.report.digest import (  # noqa: E402
    concat_rows,
    digest,
    is_notable,
    record_rows,
    step_time_stragglers,
)
from bench.analysis.report.frame import COLUMNS  # noqa: E402
from reports.report.build import build_report  # noqa: E402


def with_rank_medians(record, medians):
    return record.model_copy(
        update={"metrics": record.metrics.model_copy(update={"rank_step_time_medians_s": medians})}
    )


def autotuned(record, rank):
    return record.model_copy(
        update={"prediction": {"autotune": {"rank": rank, "value": 1.0, "objective": "tokens_per_s"}}}
    )


def sweep():
    plain = sample_sweep()
    return [
        *plain[:3],
        with_rank_medians(make_record(nodes=2, strategy="hybrid_shard"), [0.10, 0.10, 0.10, 0.16]),  # rank 3: +60 %
        autotuned(make_record(nodes=1, strategy="shard_grad_op"), 1),
        *plain[3:],
        on_loaded_host(make_record(nodes=2, strategy="shard_grad_op")),
        autotuned(make_record(nodes=2, strategy="shard_grad_op", micro_batch=4), 2),  # a second autotuned point
        autotuned(on_loaded_host(make_record(nodes=4, strategy="shard_grad_op")), 3),  # autotuned and loaded
    ]


def test_the_notable_records_are_those_the_report_shows_more_of():
    records = sweep()
    assert step_time_stragglers(records[3]) == {3: pytest.approx(0.6)}
    assert step_time_stragglers(with_rank_medians(records[3], [0.1, 0.16])) == {1: pytest.approx(0.16 / 0.13 - 1)}
    assert step_time_stragglers(records[0]) == {}
    found = digest(records)
    # The straggler, the first autotuned point, the loaded host and the autotuned point on a loaded
    # host; not the second autotuned point (its objective is the first's), nor any plain point.
    assert [records.index(r) for r in found.notable] == [3, 4, 10, 12]
    assert not any(is_notable(r) for r in sample_sweep())
    assert len(found) == 13 and found.ok == 11
    assert set(found.columns) == set(COLUMNS) and found.columns == frame_columns(records)


def test_rows_of_consecutive_shares_concatenate_into_the_rows_of_all():
    """The shares' rows (each keeps its own first autotuned record whole) give the digest of all."""
    records = sweep()
    files = [f"f{i}" for i in range(len(records))]
    whole = digest(records)
    for split in (0, 4, 5, 12, len(records)):
        rows = concat_rows([record_rows(records[:split], files[:split]), record_rows(records[split:], files[split:])])
        assert rows.files == files and rows.tuned == [4, 11, 12], split
        assert rows.columns == whole.columns and rows.digest().notable == whole.notable, split


def test_the_report_of_a_digest_is_the_report_of_its_records(tmp_path):
    records = sweep()
    pages = [
        build_report(source, tmp_path / name).read_text() for name, source in (("r", records), ("d", digest(records)))
    ]
    assert re.sub("Generated [^<]*", "", pages[0]) == re.sub("Generated [^<]*", "", pages[1])
    assert "Points measured on a loaded host (2)" in pages[0] and "Autotune: predicted vs measured ranking" in pages[0]
    assert "point unit/" in pages[0] and "step time" in pages[0]  # the straggler's row
    assert (tmp_path / "r" / "results.csv").read_bytes() == (tmp_path / "d" / "results.csv").read_bytes()
