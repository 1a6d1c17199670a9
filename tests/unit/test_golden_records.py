"""Records last, pinned: every fixture record keeps its point id and reads to the same values.

tests/fixtures/records/golden.json holds, per fixture record (every `result.json` under
tests/fixtures/records, all schema versions), what it read as when the file was written: the id
stored in it, the id its spec hashes to today (records written under an older identity encoding keep
the stored one, which differs), check's matching key, history's series key, the identity
itself and a digest of the whole migrated record. Beside them: the keys of the version-1 baseline
file's points, and the ids of spec variants that exercise every identity rule (fields added later,
knobs that count only under one checkpointing mode, the legacy `selective`, slowdown knobs, excluded
fields). A migration or an identity rule that changes what an old record says fails here.

Regenerate only on purpose (a deliberate change of what a stored record means), with the code whose
reading is to be pinned:
    python tests/unit/test_golden_records.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.analysis.check.baseline import parse_baseline
from bench.analysis.check.points import identity_key, match_identity
from bench.analysis.records import parse_record
from bench.analysis.stats import series_key
from bench.schema.spec import RunSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
GOLDEN = FIXTURES / "golden.json"
BASELINE = FIXTURES / "v1_baseline.json"
# The record the spec variants start from (a version-1 record: its spec is migrated first).
VARIANT_BASE = FIXTURES / "v1" / "v1_scaling" / "4c97ed917cda" / "result.json"

# Spec changes (dotted key -> value) whose ids are pinned: each rule of the identity once.
VARIANTS: dict[str, dict[str, Any]] = {
    "as_is": {},
    "repeat": {"repeat": 1},
    "sweep_name_and_timeout": {"sweep.name": "elsewhere", "sweep.point_timeout_s": 5.0},
    "telemetry_off": {"telemetry.enabled": False, "telemetry.interval_ms": 50},
    "model_description": {"model.source": "a link", "model.overrides": {"n_layers": 2}, "model.max_seq_len": 4096},
    "cluster_facts": {"cluster.inter_node_gbps": 1.0, "cluster.source": "x", "cluster.gpus_per_node": 8},
    "cluster_name": {"cluster.name": "another"},
    "model_shape": {"model.norm_eps": 1e-6},
    "checkpoint_dir_and_resume": {"train.checkpoint_dir": "/elsewhere", "train.resume": True},
    "checkpoint_sync": {"train.checkpoint": "sync"},
    "checkpoint_sync_every_2": {"train.checkpoint": "sync", "train.checkpoint_every": 2},
    "ac_full": {"train.activation_checkpointing": "full"},
    "ac_full_with_knobs": {"train.activation_checkpointing": "full", "train.ac_every": 3, "train.ac_save_ops": ["mm"]},
    "ac_selective_layer_default": {"train.activation_checkpointing": "selective_layer"},
    "ac_selective_layer_every_3": {"train.activation_checkpointing": "selective_layer", "train.ac_every": 3},
    "ac_selective_op": {"train.activation_checkpointing": "selective_op"},
    "ac_selective_op_save_mm": {"train.activation_checkpointing": "selective_op", "train.ac_save_ops": ["mm"]},
    "ac_selective_op_every_3": {"train.activation_checkpointing": "selective_op", "train.ac_every": 3},
    "slow_fraction": {"debug.slow_fraction": 0.5},
    "slow_rank": {"debug.slow_rank": 0},
    "comm_delay": {"debug.comm_delay_ms": 20.0},
    "extra_matmuls": {"debug.extra_matmuls": 4},
    "profile_on": {"profile.enabled": True, "profile.steps": 2, "profile.max_mib": 8.0},
    "fail_rank": {"debug.fail_rank": 0, "debug.fail_step": 3},
    "compile_backend": {"train.compile_backend": "aot_eager"},
    "kills": {"debug.kill_steps": [6, 10], "debug.kill_rank": 0, "debug.kill_mtbf_s": 60.0, "debug.kill_seed": 1},
}


RECORD_PATHS = sorted(str(path.relative_to(FIXTURES)) for path in FIXTURES.rglob("result.json"))


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def reading(spec: RunSpec) -> dict[str, Any]:
    """What the identity rules make of one spec."""
    identity = spec.identity()
    return {
        "point_id": spec.point_id,
        "check_key": identity_key(match_identity(spec)),
        "series_key": digest(series_key(identity)),
        "family_key": digest(series_key(identity, across_nodes=True)),
        "identity": identity,
    }


def variant(spec: dict[str, Any], changes: dict[str, Any]) -> RunSpec:
    data = json.loads(json.dumps(spec))
    for dotted, value in changes.items():
        *parents, name = dotted.split(".")
        node = data
        for parent in parents:
            node = node[parent]
        node[name] = value
    return RunSpec.model_validate(data)


def snapshot() -> dict[str, Any]:
    records = {}
    for path in RECORD_PATHS:
        record = parse_record(json.loads((FIXTURES / path).read_text()))
        records[path] = {
            "stored_point_id": record.point_id,
            **reading(record.spec),
            "record_sha256": digest(record.model_dump(mode="json")),
        }
    side = parse_baseline(json.loads(BASELINE.read_text()), str(BASELINE))
    baseline = [{"key": p.key, "identity_sha256": digest(p.identity)} for p in side.points]
    base = parse_record(json.loads(VARIANT_BASE.read_text())).spec.model_dump(mode="json")
    variants = {name: reading(variant(base, changes)) for name, changes in VARIANTS.items()}
    return {"records": records, "baseline_points": baseline, "variants": variants}


@pytest.fixture(scope="module")
def golden_and_now() -> tuple[dict[str, Any], dict[str, Any]]:
    return json.loads(GOLDEN.read_text()), snapshot()


def test_every_fixture_record_is_pinned(golden_and_now):
    golden, now = golden_and_now
    assert sorted(golden["records"]) == RECORD_PATHS  # a new fixture record is pinned too
    assert len(RECORD_PATHS) == 31


@pytest.mark.parametrize("path", RECORD_PATHS)
def test_a_fixture_record_keeps_its_id_and_reads_as_it_did(golden_and_now, path):
    golden, now = golden_and_now
    want, got = golden["records"][path], now["records"][path]
    # The stored id is the one reports and ledgers use; the spec's hash (which older identity
    # encodings made differently) is what check, resume and history match: both stay.
    assert (got["stored_point_id"], got["point_id"]) == (want["stored_point_id"], want["point_id"])
    assert got == want


def test_the_v1_baseline_keeps_its_keys(golden_and_now):
    golden, now = golden_and_now
    assert now["baseline_points"] == golden["baseline_points"]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_identity_rule_gives_the_ids_it_gave(golden_and_now, name):
    golden, now = golden_and_now
    assert now["variants"][name] == golden["variants"][name]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        GOLDEN.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN}")
