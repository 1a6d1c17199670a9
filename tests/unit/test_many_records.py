"""Reading many records at once gives what reading each one gives.

- the metric catalogue's columns (bench.schema.metrics.columns, PathReader) are `values` of each
  record, for every view, from the models and from their JSON dicts;
- the frame's series keys (bench/analysis/report/series_keys.py) are stats.scaling_key of each
  record's own identity, also where the grouped fields take unusual values (selective AC's knob,
  a slowdown knob at -0.0 beside 0.0, other batches and node counts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.analysis.records import load_records
from bench.analysis.report.series_keys import scaling_keys
from bench.analysis.stats import scaling_key
from bench.schema.metrics import PathReader, columns, values

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
# The views that read record paths ("report" shows only what the report computes: usd_per_mtoken).
VIEWS = ("frame", "store", "check", "console", "sweep", "gpu")


@pytest.fixture(scope="module")
def records():
    found, _ = load_records(FIXTURES)
    assert len(found) > 20
    return found


def test_metric_columns_are_each_records_values(records):
    as_json = [json.loads(r.model_dump_json()) for r in records]
    for view in VIEWS:  # one test for every view (a parameter named after the GPU view would need a GPU)
        for batch in (records, as_json):
            got = columns(batch, view)
            expected = [values(r, view) for r in batch]
            assert [{k: column[i] for k, column in got.items()} for i in range(len(batch))] == expected, view
        # Some value of the view is set in the fixtures (the comparison is not of Nones alone).
        assert any(v is not None for row in expected for v in row.values()), view


def test_a_path_through_a_list_maps_it_and_none_stays_none(records):
    read = PathReader([{"a": [{"b": 1}, {"b": None}, None]}, {"a": None}, {}, {"a": {"b": 2}}])
    assert read("a.b") == [[1, None, None], None, None, 2]
    assert len(read) == 4


def _step(value, name):
    """One step of a path, as PathReader's rules say: None stays None, a list maps over its items, a
    dict's key, an object's attribute, None where there is none."""
    if isinstance(value, list):
        return [_step(item, name) for item in value]
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def test_models_dicts_and_nones_mixed_read_as_each_value_alone(records):
    """Each kind of column (one class with Nones, kinds mixed, a property, a name some value lacks)
    reads what one step of the path reads of each value."""
    metrics = [r.metrics for r in records]
    mixed = [None, *metrics[:3], None, records[0].model_dump(mode="json")["metrics"], 7, [metrics[0], None]]
    for batch in ([None, *metrics, None], mixed, [r.spec for r in records]):
        wrapped = [{"m": value} for value in batch]
        together, alone = PathReader(wrapped), PathReader(wrapped)  # a name some value lacks, among others or alone
        paths = ["m.tokens_per_s", "m.mfu", "m.step_time_s", "m.device_type", "m.no_such_field"]
        together.read_all(paths)
        alone.read_all(paths[:2])
        for path in paths:
            expected = [_step(value, path.split(".")[1]) for value in batch]
            assert together(path) == alone(path) == expected, path


def _variants(records):
    """Copies of the fixtures' ok records at other node counts, batches, AC modes and a -0.0 knob."""
    base = [r for r in records if r.status == "ok"][:4]
    out = []
    for i, record in enumerate(base):
        spec = record.spec
        for nodes, micro, ac, slow in ((1, 1, "none", 0.0), (2, 1, "none", -0.0), (2, 2, "selective_layer", 0.0),
                                       (4, 2, "selective_layer", -0.0), (1, 2, "none", 0.0)):  # fmt: skip
            train = spec.train.model_copy(update={"micro_batch": micro, "activation_checkpointing": ac,
                                                  "ac_every": 1 + i % 2})  # fmt: skip
            debug = spec.debug.model_copy(update={"slow_fraction": slow})
            new = spec.model_copy(update={"nodes": nodes, "world_size": nodes * spec.gpus_per_node, "train": train,
                                          "debug": debug})  # fmt: skip
            out.append(record.model_copy(update={"spec": new}))
    return out


def test_series_keys_are_each_records_scaling_keys(records):
    for batch in (records, _variants(records)):
        weak, strong = scaling_keys(batch)
        identities = [r.spec.identity() for r in batch]
        assert weak == [scaling_key(i, "weak") for i in identities]
        assert strong == [scaling_key(i, "strong") for i in identities]
    weak, strong = scaling_keys(_variants(records))
    assert len(set(weak)) > 4 and len(set(strong)) > 4  # the variants are not one series
