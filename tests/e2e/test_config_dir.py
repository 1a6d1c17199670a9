"""Users' own configs: `--config-dir DIR` (and FSDP_BENCH_CONFIG_DIR) adds models, clusters and devices
that run, sweep, plan, report and check exactly like the shipped ones, with the same clear errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

SMALL = ["train.steps=3", "train.warmup_steps=1", "train.seq_len=32"]


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def user_dir(tmp_path) -> Path:
    root = tmp_path / "my-configs"
    write(
        root,
        "model/mini.yaml",
        """\
        # A user's own small model (not in the package).
        name: mini
        dim: 32
        n_layers: 2
        n_heads: 2
        n_kv_heads: 1
        ffn_dim: 64
        vocab_size: 256
        max_seq_len: 128
        source: our own test size
    """,
    )
    write(
        root,
        "model/llama3.1-8b.yaml",
        """\
        name: llama3.1-8b
        dim: 4096
        n_layers: 32
        n_heads: 32
        n_kv_heads: 8
        ffn_dim: 14336
        vocab_size: 128256
        max_seq_len: 131072
        default_seq_len: 8192
        rope_theta: 500000.0
        source: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
    """,
    )
    write(
        root,
        "cluster/our-h100-ib.yaml",
        """\
        # Our H100 nodes with 400 Gb/s InfiniBand.
        defaults:
          - _base
          - /device@device: h100-sxm
          - _self_
        name: our-h100-ib
        gpus_per_node: 8
        intra_node_gbps: 3600
        inter_node_gbps: 400
        source: our lab
    """,
    )
    write(
        root,
        "cluster/our-cpu.yaml",
        """\
        defaults:
          - _base
          - /device@device: cpu
          - _self_
        name: our-cpu
        device_type: cpu
        gpus_per_node: 1
        intra_node_gbps: 8
        inter_node_gbps: 8
    """,
    )
    return root


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_a_custom_model_and_cluster_run_sweep_report_and_check(fsdp_bench, user_dir, tmp_path):
    results = tmp_path / "results"
    # The run stores its point in the sweep's folder: the sweep then launches only the other one.
    run = fsdp_bench("run", "--config-dir", user_dir, "model=mini", "cluster=our-cpu", "nodes=2", *SMALL,
                     "sweep.name=mine", f"results_dir={results}", results=results)  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    (record,) = run.records
    assert record.status == "ok"
    assert (record.spec.model.name, record.spec.model.dim, record.spec.cluster.name) == ("mini", 32, "our-cpu")
    assert record.model_info.params == 2 * 256 * 32 + 2 * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64 + 64) + 32
    sweep = fsdp_bench("sweep", "--config-dir", user_dir, "model=mini", "cluster=our-cpu", "nodes=1,2", *SMALL,
                       "sweep.name=mine", f"results_dir={results}", "report=false", results=results / "mine")  # fmt: skip
    assert sweep.rc == 0, sweep.stdout + sweep.stderr
    assert sorted(r.spec.nodes for r in sweep.records) == [1, 2]
    assert sweep.stdout.count("done: ok result exists") == 1  # the run's point, same config, same id
    # Reading needs no config dir: a record carries the facts it ran with.
    report = fsdp_bench("report", results / "mine", "-o", tmp_path / "report")
    assert report.rc == 0 and "(2 points: 2 ok, 0 not ok)" in report.stdout
    check = fsdp_bench("check", results / "mine", "--baseline", results / "mine")
    assert check.rc == 0, check.stdout + check.stderr


def test_plan_uses_the_users_cluster_facts(fsdp_bench, user_dir, monkeypatch):
    args = ("plan", "--json", "model=llama3.1-8b", "nodes=1,2", "gpus_per_node=8", "precision=bf16")
    own = fsdp_bench("plan", "--config-dir", user_dir, *args[1:], "cluster=our-h100-ib")
    assert own.rc == 0, own.stderr
    predictions = json.loads(own.stdout)
    assert predictions[0]["spec"]["cluster"]["inter_node_gbps"] == 400
    assert predictions[0]["model_info"]["params"] == 8_030_261_248
    # The same through the environment variable, and the 400 Gb/s fabric costs efficiency against p5's 3200.
    monkeypatch.setenv("FSDP_BENCH_CONFIG_DIR", str(user_dir))
    p5 = json.loads(fsdp_bench(*args, "cluster=p5.48xlarge").stdout)
    assert predictions[1]["scaling_efficiency"] < p5[1]["scaling_efficiency"]


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        ("cluster/bad.yaml", "defaults: [_base, /device@device: cpu, _self_]\nname: bad\ngpus_per_node: 1\n"
         "intra_node_gbps: 8\n", "cluster.inter_node_gbps: missing"),
        ("cluster/bad.yaml", "defaults: [_base, /device@device: cpu, _self_]\nname: bad\ngpus_per_node: 1\n"
         "intra_node_gbps: 8\ninter_node_gbps: -1\n", "cluster.inter_node_gbps: must be positive, got -1"),
        ("cluster/bad.yaml", "defaults: [_base, /device@device: cpu, _self_]\nname: bad\ngpus_per_node: lots\n"
         "intra_node_gbps: 8\ninter_node_gbps: 8\n", "cluster.gpus_per_node: Input should be a valid integer"),
        ("cluster/bad.yaml", "defaults: [_base, /device@device: tpu-v9, _self_]\nname: bad\n",
         "cluster: device: unknown device 'tpu-v9'; allowed: a100-40gb,"),
        ("model/bad.yaml", "name: bad\ndim: 30\nn_layers: 1\nn_heads: 4\nn_kv_heads: 1\nffn_dim: 8\nvocab_size: 8\n"
         "max_seq_len: 8\n", "model: dim=30 must be divisible by n_heads=4"),
    ],
)  # fmt: skip
def test_a_broken_user_file_is_one_line_naming_the_file_and_field(fsdp_bench, tmp_path, file, text, expected):
    root = tmp_path / "configs"
    path = write(root, file, text)
    group = file.split("/")[0]
    other = "cluster=local-cpu" if group == "model" else "model=debug"
    # Refused before anything launches: the console script's code in this process.
    run = fsdp_bench(
        "run", "--config-dir", root, f"{group}=bad", other, f"results_dir={tmp_path / 'r'}", separate=False
    )
    assert run.rc == 2 and run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert expected in line, line
    if "device" not in expected:
        assert str(path) in line  # the user's file is named
    assert not (tmp_path / "r").exists()  # nothing launched


def test_a_user_file_may_not_take_a_shipped_name(fsdp_bench, tmp_path):
    root = tmp_path / "configs"
    write(root, "cluster/p5.48xlarge.yaml", "name: p5.48xlarge\n")
    run = fsdp_bench("plan", "--config-dir", root, "model=debug")
    assert run.rc == 2
    assert "cluster 'p5.48xlarge' is already defined by" in run.stderr and "give yours another name" in run.stderr
    missing = fsdp_bench("plan", "--config-dir", tmp_path / "nowhere", "model=debug")
    assert (missing.rc, missing.stderr) == (2, f"error: --config-dir: {tmp_path / 'nowhere'} does not exist\n")
