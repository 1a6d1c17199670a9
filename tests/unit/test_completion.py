"""The words shell completion offers for overrides (bench/cli/completion.py), asked of the completer
as argcomplete asks it; tests/e2e/test_shell_completion.py asks bash itself."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from bench.cli.completion import complete_override
from bench.config.registry import SHIPPED, option_files


@pytest.fixture(autouse=True)
def clean_search_path(monkeypatch):
    monkeypatch.delenv("FSDP_BENCH_CONFIG_DIR", raising=False)


def test_groups_and_their_options():
    assert complete_override("mo") == ["model="]
    assert complete_override("model=") == [f"model={name}" for name in sorted(option_files("model"))]
    assert complete_override("model=ti") == ["model=tiny", "model=tinyllama-1.1b"]
    assert complete_override("cluster=p5e.") == ["cluster=p5e.48xlarge"]
    assert complete_override("model=tiny,deb") == ["model=tiny,debug"]  # a grid's next value
    assert complete_override("+experiment=cpu_sm") == ["+experiment=cpu_smoke"]


def test_keys_and_their_allowed_values():
    words = complete_override("")
    assert {"model=", "experiment=", "nodes=", "train.", "sweep.", "debug."} <= set(words)
    assert complete_override("train.se") == ["train.seq_len=", "train.seed="]
    assert "train.checkpoint=" in complete_override("tr")  # one section: its keys, not `train.` and a space
    assert complete_override("train.checkpoint=") == [
        "train.checkpoint=none",
        "train.checkpoint=sync",
        "train.checkpoint=async",
    ]
    assert complete_override("sweep.force=") == ["sweep.force=true", "sweep.force=false"]
    assert complete_override("sweep.orphans=w") == ["sweep.orphans=wait"]
    assert complete_override("nodes=") == []  # any number: nothing to offer


def test_a_users_folder_completes_too(tmp_path):
    model = yaml.safe_load((SHIPPED / "model" / "tiny.yaml").read_text())
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny-wide.yaml").write_text(yaml.safe_dump({**model, "name": "tiny-wide", "dim": 512}))
    asked = SimpleNamespace(config_dir=[str(tmp_path)])
    assert complete_override("model=tiny", asked) == ["model=tiny", "model=tiny-wide", "model=tinyllama-1.1b"]
