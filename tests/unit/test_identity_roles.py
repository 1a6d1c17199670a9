"""Every spec field declares its identity role (bench/schema/identity.py), and the lists derived from
the declarations say what the identity rules always said (the ids themselves are pinned by
tests/unit/test_golden_records.py)."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from bench.schema.identity import IN, LATER, REASONS, Role, declarations, identity_of, paths, without
from bench.schema.spec import CHECK_DROPPED, LATER_FIELDS, SERIES_DROPPED, SLOWDOWN_KNOBS, RunSpec


def test_every_spec_field_at_every_depth_declares_one_role():
    declared = list(declarations(RunSpec))
    missing = [".".join(path) for path, role in declared if role is None]
    assert missing == [], f"fields without an identity role (Annotated[..., IN | LATER | WHERE | ...]): {missing}"
    sections = {path[0] for path, _ in declared if len(path) > 1}
    assert sections == {"sweep", "model", "cluster", "train", "debug", "telemetry", "profile"}
    assert ("cluster", "device", "peak_tflops") in dict(declared)  # an excluded section's fields declare too
    assert len(declared) > 70


def test_the_derived_lists_are_what_the_rules_were():
    assert set(LATER_FIELDS) == {
        ("debug", "slow_rank"),
        ("debug", "comm_delay_ms"),
        ("debug", "extra_matmuls"),
        ("debug", "kill_steps"),
        ("debug", "kill_rank"),
        ("debug", "kill_mtbf_s"),
        ("debug", "kill_seed"),
        ("train", "ac_every"),
        ("train", "ac_save_ops"),
        ("train", "checkpoint"),
        ("train", "checkpoint_every"),
    }
    knobs = {("debug", "slow_fraction"), ("debug", "slow_rank"), ("debug", "comm_delay_ms"), ("debug", "extra_matmuls")}
    assert set(SLOWDOWN_KNOBS) == knobs
    assert set(CHECK_DROPPED) == {("repeat",), *knobs}
    assert set(SERIES_DROPPED) == {("repeat",), ("debug",)}
    excluded = {path: role.reason for path, role in declarations(RunSpec) if role.enters == "excluded"}
    assert {path for path, reason in excluded.items() if reason == "observes"} >= {("telemetry",), ("profile",)}
    assert excluded[("sweep",)] == excluded[("train", "checkpoint_dir")] == "where"
    assert excluded[("train", "resume")] == excluded[("sweep", "point_timeout_s")] == "how"
    assert excluded[("model", "max_seq_len")] == excluded[("cluster", "inter_node_gbps")] == "describes"
    assert {p for p, r in declarations(RunSpec) if len(p) == 2 and p[0] == "cluster" and r.enters == "in"} == {
        ("cluster", "name"),
        ("cluster", "device_type"),
    }


def test_a_field_without_a_role_is_refused_by_name():
    class Section(BaseModel):
        kept: Annotated[int, IN] = 1
        forgotten: int = 2

    class Spec(BaseModel):
        section: Annotated[Section, IN] = Field(default_factory=Section)

    with pytest.raises(TypeError, match=r"^Section\.forgotten declares no identity role"):
        identity_of(Spec())


def test_roles_say_why_exactly_when_excluded():
    with pytest.raises(ValueError, match="reason exactly when it is excluded"):
        Role("excluded")
    with pytest.raises(ValueError, match="reason exactly when it is excluded"):
        Role("in", reason="where")
    with pytest.raises(ValueError, match="allowed: where, how, describes, observes"):
        Role("excluded", reason="elsewhere")
    assert REASONS == ("where", "how", "describes", "observes")


def test_the_walk_applies_each_rule_to_a_model_of_its_own():
    """The rules are the declarations' (not the spec's): a later field, a knob under one mode, a legacy name."""
    from bench.schema.identity import Legacy

    class Knobs(BaseModel):
        mode: Annotated[str, Role("in", legacy=Legacy("b", when=(("level", 2),), name="old-b"))] = "a"
        level: Annotated[int, Role("later", only_under=("mode", "b"))] = 2
        added: Annotated[int | None, LATER] = None

    assert identity_of(Knobs()) == {"mode": "a"}
    assert identity_of(Knobs(mode="b")) == {"mode": "old-b"}
    assert identity_of(Knobs(mode="b", level=3)) == {"mode": "b", "level": 3}
    assert identity_of(Knobs(level=3, added=0)) == {"mode": "a", "added": 0}
    assert paths(Knobs, lambda role: role.enters == "later") == (("level",), ("added",))


def test_without_copies_the_sections_it_changes():
    identity = {"repeat": 1, "debug": {"slow_rank": 0, "fail_rank": None}, "nodes": 2}
    assert without(identity, (("repeat",), ("debug", "slow_rank"), ("absent", "x"))) == {
        "debug": {"fail_rank": None},
        "nodes": 2,
    }
    assert identity == {"repeat": 1, "debug": {"slow_rank": 0, "fail_rank": None}, "nodes": 2}
