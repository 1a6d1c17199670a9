"""bench/schema/identity.py `IdentityMemo`: a batch's shared sections' identities computed once give
the same identities, point ids and series keys as computing each spec alone (its texts too); and
bench/analysis/planner/predict.py `SpecDumps`: the shared sections dumped once give each spec's dump."""

from __future__ import annotations

import json
from pathlib import Path

from bench.analysis.planner.predict import SpecDumps
from bench.analysis.records import parse_record
from bench.analysis.stats import scaling_key
from bench.config.compose import load_grid
from bench.schema.identity import IdentityMemo, canonical_json, identity_of
from bench.schema.spec import point_id_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
# A grid whose points share model, cluster and train sections, with the identity's rules at work:
# later fields set and at their defaults, every checkpointing mode.
GRID = [
    "cluster=p5.48xlarge", "gpus_per_node=8", "model=llama2-7b,llama3-8b", "nodes=1,2,4",
    "strategy=full_shard,hybrid_shard,no_shard", "precision=bf16,fp8",
    "train.activation_checkpointing=none,full,selective_layer,selective_op", "train.micro_batch=1,2",
    "train.checkpoint=none,sync",
]  # fmt: skip


def assert_same_as_alone(specs: list) -> None:
    memo = IdentityMemo()
    identities = [memo.identity(spec) for spec in specs]
    alone = [identity_of(spec) for spec in specs]
    assert identities == alone
    assert [point_id_of(i) for i in identities] == [spec.point_id for spec in specs]
    for mode in ("weak", "strong"):
        assert [scaling_key(i, mode) for i in identities] == [scaling_key(i, mode) for i in alone]
        # The memo's texts, its shared sections' written once: the same keys as json.dumps writes.
        assert [scaling_key(i, mode, memo.canonical_json) for i in identities] == [scaling_key(i, mode) for i in alone]
    assert [memo.canonical_json(i) for i in identities] == [canonical_json(i) for i in alone]
    # Reading the shared sections changed none of them: a second pass gives the same again.
    assert [memo.identity(spec) for spec in specs] == alone
    # Each spec's dump, key order included, from its sections dumped once.
    dumps = SpecDumps()
    for _ in range(2):
        assert [list(dumps.dump(spec).items()) for spec in specs] == [
            list(spec.model_dump(mode="json").items()) for spec in specs
        ]


def test_a_grid_shares_sections_and_keeps_every_identity():
    specs = [point.spec for point in load_grid(GRID)]
    assert len(specs) == 2 * 3 * 3 * 2 * 4 * 2 * 2
    assert len({id(spec.train) for spec in specs}) < len(specs)  # what the memo is for: shared sections
    assert_same_as_alone(specs)


def test_every_fixture_record_keeps_its_id_through_the_memo():
    records = [parse_record(json.loads(path.read_text())) for path in sorted(FIXTURES.rglob("result.json"))]
    assert len(records) > 5
    specs = [record.spec for record in records]
    assert_same_as_alone(specs + specs)  # the same section objects twice: hits of the memo
