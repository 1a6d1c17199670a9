"""Every default written in sweeps/ equals the default of the schema field it feeds.

sweeps/config.yaml writes each section's keys (so `train.seed=1` overrides an existing key) and the
group files' `_base` files (and each launcher's file) the fields every option of the group shares; the schema (bench/schema, the launchers' options)
declares the same fields with their defaults. The two must say the same thing, or a default would
depend on whether a point was composed from the YAML or built in Python (a test, the planner, a
record read back). Where the YAML deliberately says something else, DIFFERENT says why.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from bench.config.registry import SHIPPED
from bench.run.launch import LAUNCHER_CLASSES
from bench.run.launch.options import ConfiguredLauncher
from bench.schema.options import PreflightSettings, SearchOptions, SweepOptions
from bench.schema.spec import ClusterSpec, DebugKnobs, PointSweep, ProfileSpec, RunSpec, TelemetrySpec, TrainSpec

# sweeps/config.yaml's sections -> the schema types they feed (sweep.* feeds both how a sweep runs
# and the point's own part of it).
SECTIONS: dict[str, tuple[type[BaseModel], ...]] = {
    "train": (TrainSpec,),
    "debug": (DebugKnobs,),
    "telemetry": (TelemetrySpec,),
    "profile": (ProfileSpec,),
    "sweep": (SweepOptions, PointSweep),
    "preflight": (PreflightSettings,),
    "search": (SearchOptions,),
}
# Top-level keys of sweeps/config.yaml that are RunSpec fields.
TOP_LEVEL = ("nodes", "gpus_per_node")
# <group>/_base.yaml -> the type its options validate into.
BASES: dict[str, type[BaseModel]] = {"cluster": ClusterSpec}
# launcher/<name>.yaml -> the launcher's typed options (every launcher with fields of its own).
LAUNCHERS: dict[str, type[BaseModel]] = {
    name: cls.options_class
    for name, class_name in LAUNCHER_CLASSES.items()
    if issubclass(cls := getattr(importlib.import_module(f"bench.run.launch.{name}"), class_name), ConfiguredLauncher)
}

# (file, key, schema type) -> why the YAML's value differs from that type's default.
DIFFERENT: dict[tuple[str, str, str], str] = {
    ("config.yaml", "sweep.name", "PointSweep"): "null: the experiment's name, or adhoc for a lone run "
    "(RunSpec.from_config resolves it, so a point's name is always set; SweepOptions' default is null too)",
    ("cluster/_base.yaml", "peak_tflops", "ClusterSpec"): "lists every dtype (null: the device's peak) so that "
    "`cluster.peak_tflops.<dtype>=...` overrides an existing key; the schema's empty mapping means the same",
}

NO_DEFAULT = object()


def schema_default(model: type[BaseModel], name: str) -> Any:
    field = model.model_fields[name]
    if field.default is PydanticUndefined and field.default_factory is None:
        return NO_DEFAULT
    return field.get_default(call_default_factory=True)


def load(relative: str) -> dict[str, Any]:
    data = yaml.safe_load((SHIPPED / relative).read_text())
    data.pop("defaults", None)  # Hydra's composition order, not a field
    return data


def yaml_defaults() -> list[tuple[str, str, Any, type[BaseModel]]]:
    """(file, key, YAML value, schema type) of every default sweeps/ writes for a schema field."""
    config = load("config.yaml")
    rows = [("config.yaml", key, config[key], RunSpec) for key in TOP_LEVEL]
    for section, models in SECTIONS.items():
        for key, value in config[section].items():
            rows += [("config.yaml", f"{section}.{key}", value, m) for m in models if key in m.model_fields]
    for group, model in BASES.items():
        rows += [(f"{group}/_base.yaml", key, value, model) for key, value in load(f"{group}/_base.yaml").items()]
    for name, model in LAUNCHERS.items():
        options = load(f"launcher/{name}.yaml")
        rows += [(f"launcher/{name}.yaml", key, value, model) for key, value in options.items() if key != "name"]
    return rows


ROWS = yaml_defaults()


@pytest.mark.parametrize(("file", "key", "value", "model"), ROWS, ids=[f"{r[0]}:{r[1]}:{r[3].__name__}" for r in ROWS])
def test_a_yaml_default_equals_the_schema_default(file, key, value, model):
    default = schema_default(model, key.rsplit(".", 1)[-1])
    assert default is not NO_DEFAULT, f"{file}: {key} sets a field without a default in {model.__name__}"
    # Equal values of the same type (bool is not int); a YAML integer feeds a float field as pydantic reads it.
    same = value == default and (type(value) is type(default) or (type(value), type(default)) == (int, float))
    if (file, key, model.__name__) in DIFFERENT:
        assert not same, f"{file}: {key} now equals {model.__name__}'s default: drop it from DIFFERENT"
        return
    assert same, f"{file}: {key} is {value!r}, {model.__name__}'s default is {default!r}"


def test_every_key_sweeps_writes_feeds_a_schema_field_and_every_field_has_its_key():
    """A key the schema does not know would be refused when composed; a field the YAML lacks could
    only be overridden with Hydra's `+key=`, unlike every other."""
    config = load("config.yaml")
    for section, models in SECTIONS.items():
        fields = set().union(*(m.model_fields for m in models))
        assert set(config[section]) <= fields, f"config.yaml {section}: keys the schema lacks"
        for model in models:
            if model is not PointSweep:  # a point's part of sweep.*: a subset of SweepOptions
                assert set(model.model_fields) <= set(config[section]), f"{section}: fields config.yaml lacks"
    for group, model in BASES.items():
        assert set(load(f"{group}/_base.yaml")) <= set(model.model_fields)
    for name, model in LAUNCHERS.items():
        assert set(load(f"launcher/{name}.yaml")) - {"name"} == set(model.model_fields), f"launcher/{name}.yaml"
    written = {(file, key, model.__name__) for file, key, _, model in ROWS}
    assert written >= set(DIFFERENT), "DIFFERENT names a key sweeps/ no longer writes"


def test_every_launcher_with_options_is_compared():
    assert set(LAUNCHERS) == {"local", "slurm", "kubeflow", "ray"}
    assert sum(1 for r in ROWS if r[0].startswith("launcher/")) >= 52


def test_the_comparison_fails_when_one_side_changes(monkeypatch):
    """Changing a default on either side is caught: the YAML's value, or the schema's."""
    row = next(r for r in ROWS if r[1] == "train.seed")
    with pytest.raises(AssertionError, match="train.seed is 1, TrainSpec's default is 0"):
        test_a_yaml_default_equals_the_schema_default(row[0], row[1], 1, row[3])
    monkeypatch.setattr(TrainSpec.model_fields["lr"], "default", 1e-3)
    lr = next(r for r in ROWS if r[1] == "train.lr")
    with pytest.raises(AssertionError, match="train.lr is 0.0003, TrainSpec's default is 0.001"):
        test_a_yaml_default_equals_the_schema_default(*lr)


def test_the_sweep_commands_top_level_defaults_are_the_yamls():
    """results_dir and report configure the sweep command, not a point: bench/config/toplevel.py holds
    their defaults, and an absent or null key reads as them."""
    from bench.config import toplevel

    config = load("config.yaml")
    assert (config["results_dir"], config["report"]) == (toplevel.RESULTS_DIR, toplevel.REPORT)
    assert str(toplevel.results_dir({"results_dir": None})) == "results"
    assert toplevel.wants_report({}) is True and toplevel.wants_report({"report": False}) is False
