"""`fsdp-bench plan --best`: the search space, its ranking, why the next ones lose, bad input; the
report's autotune section; Spearman's rank correlation (bench.analysis.stats)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from bench_cli import in_process

from bench.analysis.planner import predict
from bench.analysis.planner.search import AXES, Candidate, loss_reason, search
from bench.analysis.stats import rank_correlation
from bench.config.compose import load_point
from bench.schema.spec import CHECKPOINTING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.report.views import analyse  # noqa: E402
from reports.report.autotune import autotune_section  # noqa: E402

CPU_SETUP = ["model=debug", "nodes=1", "gpus_per_node=2", "train.seq_len=32"]


def best_json(*argv: str) -> dict:
    run = in_process("plan", "--best", "--json", *argv)
    assert run.rc == 0, run.stderr
    return json.loads(run.stdout)


def error_of(*argv: str) -> str:
    run = in_process("plan", "--best", *argv)
    assert run.rc == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_cpu_search_space_ranking_and_constraints():
    out = best_json(*CPU_SETUP, "strategy=full_shard,no_shard", "precision=fp32,bf16,fp8",
                    "train.micro_batch=1,4", "--top", "2")  # fmt: skip
    # 2 strategies x 3 precisions x 2 micro-batches x every checkpointing mode (the schema's list),
    # compile only false on a CPU (the planner models its speed-up on GPUs).
    assert out["axes"]["train.activation_checkpointing"] == list(CHECKPOINTING)
    assert out["axes"]["train.compile"] == ["false"] and out["axes"]["train.grad_accum"] == ["1"]
    searched = 2 * 3 * 2 * len(CHECKPOINTING)
    assert out["searched"] == searched
    assert list(out["excluded"].values()) == [searched // 3]  # fp8 needs a CUDA GPU
    assert next(iter(out["excluded"])).startswith("precision: fp8 needs a CUDA GPU")
    assert out["fitting"] == searched - searched // 3 and out["not_fitting"] == 0
    # The ranking is the planner's: recompute each configuration's prediction independently.
    ranked = [*out["top"], *out["next"]]
    assert [r["rank"] for r in ranked] == [1, 2, 3, 4]
    for entry in ranked:
        spec = load_point(
            [
                *CPU_SETUP,
                f"strategy={entry['spec']['strategy']}",
                f"precision={entry['spec']['precision']}",
                f"train.micro_batch={entry['spec']['train']['micro_batch']}",
                f"train.activation_checkpointing={entry['spec']['train']['activation_checkpointing']}",
            ]  # fmt: skip
        ).spec
        assert predict(spec)["tokens_per_s"] == pytest.approx(entry["tokens_per_s"], rel=1e-12)
    values = [r["tokens_per_s"] for r in ranked]
    assert values == sorted(values, reverse=True)
    every = search([*CPU_SETUP, "strategy=full_shard,no_shard", "precision=fp32,bf16", "train.micro_batch=1,4"])
    assert max(c.value("tokens_per_s") for c in every.ranked) == values[0]
    assert all(entry["reason"] for entry in out["next"])


def test_a_fixed_global_batch_sets_grad_accum():
    out = best_json(*CPU_SETUP, "search.global_batch=8", "strategy=full_shard", "precision=fp32",
                    "train.activation_checkpointing=none", "--top", "3")  # fmt: skip
    # 8 sequences on 2 ranks: micro-batch 1, 2 or 4 with grad_accum 4, 2 or 1; 8 and more do not divide.
    assert out["searched"] == 3
    batches = {(e["spec"]["train"]["micro_batch"], e["spec"]["train"]["grad_accum"]) for e in out["top"]}
    assert batches == {(1, 4), (2, 2), (4, 1)}
    assert {e["tokens_per_step"] for e in out["top"]} == {8 * 32}


def test_gpu_search_uses_whole_nodes_and_explains_losses():
    out = best_json("model=llama2-7b", "cluster=p5.48xlarge", "nodes=2", "precision=bf16",
                    "strategy=full_shard,no_shard", "--objective", "mfu")  # fmt: skip
    assert out["setup"]["gpus_per_node"] == 8 and out["objective"] == "mfu"
    assert out["axes"]["train.compile"] == ["false", "true"]
    mfus = [e["mfu"] for e in [*out["top"], *out["next"]]]
    assert mfus == sorted(mfus, reverse=True) and all(e["fits"] for e in out["top"])
    # llama2-7b's states alone (16 bytes per parameter) need more than 80 GiB unsharded.
    assert all(not e["fits"] for e in out["beaten_by_not_fitting"])
    assert out["not_fitting"] > 0 and all("does not fit" in e["reason"] for e in out["beaten_by_not_fitting"])


def test_loss_reasons_name_recompute_and_communication():
    def candidate(*overrides: str) -> Candidate:
        point = load_point(["model=llama2-7b", "cluster=p5.48xlarge", "gpus_per_node=8", *overrides])
        return Candidate(point, predict(point.spec))

    winner = candidate("nodes=2", "precision=bf16", "train.activation_checkpointing=none")
    recomputing = candidate("nodes=2", "precision=bf16", "train.activation_checkpointing=full")
    assert loss_reason(recomputing, winner).startswith("recompute cost: activation_checkpointing=full")
    slow_network = candidate("nodes=2", "precision=bf16", "train.activation_checkpointing=none",
                             "cluster.inter_node_gbps=5")  # fmt: skip
    assert loss_reason(slow_network, winner).startswith("communication-bound: ")
    too_big = candidate("nodes=1", "precision=fp32", "strategy=no_shard", "train.micro_batch=8")
    assert loss_reason(too_big, winner).startswith("does not fit: no_shard fp32 mb=8")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--objective", "speed"],
            "error: --objective: unknown objective 'speed'; allowed: tokens_per_s, tokens_per_s_per_device, mfu",
        ),  # fmt: skip
        (["--top", "0"], "error: --top: must be a whole number of at least 1, got 0"),
        (
            ["precision=fp8"],
            "error: empty search space: all 12 configurations break a launch rule (precision: fp8 needs a CUDA GPU",
        ),  # fmt: skip
        (
            ["--objective", "mfu"],
            "error: search.objective: mfu needs the device's datasheet peak, which local-cpu does "
            "not have; allowed here: tokens_per_s, tokens_per_s_per_device",
        ),  # fmt: skip
        (["nodes=1,2"], "error: nodes: a search ranks one setup, and nodes=1,2 gives several; choose one value"),
        (
            ["search.global_batch=3", "gpus_per_node=2"],
            "error: search.global_batch: 3 sequences per step is no micro-batch",
        ),
        (["model=llama2-70b"], "error: search: none of the"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, expected):
    setup = [
        o for o in ["model=debug", "train.seq_len=32", "train.micro_batch=1,2,4"] if o.split("=")[0] not in argv[0]
    ]
    line = error_of(*setup, "strategy=full_shard", *argv)
    assert line.startswith(expected), line


def test_text_output_names_the_top_and_the_reasons():
    run = in_process("plan", "--best", *CPU_SETUP, "strategy=full_shard", "precision=fp32", "--top", "1")
    assert run.rc == 0, run.stderr
    out = run.stdout
    assert "fsdp-bench plan --best: debug on 1 x 2 local-cpu (cpu), sequence 32" in out
    assert f"searched {7 * len(CHECKPOINTING)} configurations" in out
    assert "top 1 by predicted tokens_per_s" in out and "why each loses to #1" in out
    assert set(AXES) <= set(out.split("searched: ", 1)[1].replace(";", " ").replace("=", " ").split())


def test_rank_correlation():
    assert rank_correlation([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(0.8)
    assert rank_correlation([3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)
    assert math.isnan(rank_correlation([1, 2], [1, 2])) and math.isnan(rank_correlation([1, 1, 1], [1, 2, 3]))


def test_report_sets_predicted_beside_measured_ranking():
    measured = {"full_shard": 900.0, "shard_grad_op": 1000.0, "no_shard": 600.0, "hybrid_shard": 800.0}
    predicted = {"full_shard": 1100.0, "shard_grad_op": 1050.0, "no_shard": 1000.0, "hybrid_shard": 900.0}
    order = sorted(predicted, key=predicted.get, reverse=True)
    records = [
        make_record(strategy=s, nodes=2, tokens_per_s=measured[s],
                    prediction={"autotune": {"rank": order.index(s) + 1, "value": predicted[s], "objective": "tokens_per_s"}})
        for s in measured
    ]  # fmt: skip
    section = autotune_section(analyse(records).cells, records)
    assert section.objective == "tokens_per_s" and section.configurations == 4
    assert section.spearman == pytest.approx(rank_correlation(list(predicted.values()), list(measured.values())))
    assert section.spearman == pytest.approx(0.6)  # 1 - 6 x 4 / (4 x 15)
    assert (section.winner_predicted_rank, section.predicted_winner_measured_rank) == (2, 2)
    assert section.winner.startswith("shard_grad_op")
    assert [row[0] for row in section.table.rows] == ["1", "2", "3", "4"]
    assert [row[-1] for row in section.table.rows] == ["2", "1", "4", "3"]
    assert autotune_section(analyse(records[:1]).cells, [make_record()]) is None


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=tiny", "gpus_per_node=2"],
        ["model=llama2-7b", "cluster=p5.48xlarge", "gpus_per_node=8", "precision=bf16"],
        [
            "model=llama2-13b",
            "cluster=p5.48xlarge",
            "gpus_per_node=8",
            "nodes=2",
            "strategy=shard_grad_op",
            "precision=fp8",
            "train.activation_checkpointing=selective",
        ],  # fmt: skip
    ],
)
def test_max_micro_batch_is_the_largest_that_fits(overrides):
    """The search keeps what fits: max_micro_batch (started from the memory line) is the fitting edge."""
    from bench.analysis.planner.memory import fits, max_micro_batch
    from bench.analysis.planner.workload import workload_from_spec

    w = workload_from_spec(load_point(overrides).spec)
    largest = max_micro_batch(w)
    assert largest >= 1 and fits(w.with_micro_batch(largest)) and not fits(w.with_micro_batch(largest + 1))
    assert all(fits(w.with_micro_batch(m)) for m in range(1, largest + 1, max(1, largest // 50)))
