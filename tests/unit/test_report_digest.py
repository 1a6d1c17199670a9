"""The report's digest of many records (bench/analysis/report/digest.py): the frame's columns plus the
few records the report shows more of; digests of consecutive shares merge into the digest of all, and
the report built from a digest is the report built from the records."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, on_loaded_host, sample_sweep  # noqa: E402

from bench.analysis.report.columns import frame_columns  # noqa: E402
from bench.analysis.report.digest import digest, is_notable, merge, step_time_stragglers  # noqa: E402
from bench.analysis.report.frame import COLUMNS  # noqa: E402
from bench.present.report.build import build_report  # noqa: E402


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


def test_digests_of_consecutive_shares_merge_into_the_digest_of_all():
    records = sweep()
    whole = digest(records)
    for split in (0, 4, 5, 12, len(records)):
        merged = merge([digest(records[:split]), digest(records[split:])])
        assert merged.columns == whole.columns, split
        assert merged.notable == whole.notable, split


def test_the_report_of_a_digest_is_the_report_of_its_records(tmp_path):
    records = sweep()
    pages = [
        build_report(source, tmp_path / name).read_text() for name, source in (("r", records), ("d", digest(records)))
    ]
    assert re.sub("Generated [^<]*", "", pages[0]) == re.sub("Generated [^<]*", "", pages[1])
    assert "Points measured on a loaded host (2)" in pages[0] and "Autotune: predicted vs measured ranking" in pages[0]
    assert "point unit/" in pages[0] and "step time" in pages[0]  # the straggler's row
    assert (tmp_path / "r" / "results.csv").read_bytes() == (tmp_path / "d" / "results.csv").read_bytes()
