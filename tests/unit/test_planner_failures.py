"""The planner's failure model and cost: Young's and Daly's intervals, the goodput at the best one, the
time and dollars to train N tokens, and their bad input (pure functions and in-process `plan` calls)."""

from __future__ import annotations

import json
import math

import pytest
from bench_cli import in_process

from bench.analysis.planner.failures import (
    KillCosts,
    daly_goodput,
    daly_interval_s,
    job_mtbf_s,
    kill_schedule_goodput,
    plan_failures,
    usd_per_mtoken,
    young_interval_s,
)
from bench.schema.spec import TrainSpec
from bench.schema.units import parse_count


def test_young_and_daly_on_known_values():
    assert job_mtbf_s(6300, 2048) == pytest.approx(6300 * 3600 / 2048)
    assert young_interval_s(50.0, 10_000.0) == pytest.approx(1000.0)
    # Daly: sqrt(2 δ M)(1 + sqrt(δ/2M)/3 + (δ/2M)/9) - δ, with δ/2M = 1/400.
    assert daly_interval_s(50.0, 10_000.0) == pytest.approx(1000.0 * (1 + 0.05 / 3 + 0.0025 / 9) - 50.0)
    assert daly_interval_s(500.0, 200.0) == 200.0  # a save longer than 2M: save every MTBF
    # No failures in sight: the goodput tends to τ / (τ + δ).
    assert daly_goodput(1000.0, 10.0, 0.0, 1e12) == pytest.approx(1000.0 / 1010.0, rel=1e-6)
    # The best interval beats its neighbours.
    best = daly_interval_s(50.0, 10_000.0)
    assert daly_goodput(best, 50.0, 100.0, 1e4) > max(daly_goodput(t, 50.0, 100.0, 1e4) for t in (best / 2, best * 2))


def _train(every: int, steps: int = 12) -> TrainSpec:
    return TrainSpec(steps=steps, warmup_steps=2, checkpoint="sync", checkpoint_every=every)


def test_a_kill_schedule_redoes_the_steps_back_to_the_last_save():
    # Saves follow steps 4, 7 and 10; the kill at 6 loses step 5, the kill at 10 loses 8 and 9.
    unit_steps = KillCosts(step_s=1.0, save_s=0.0, startup_s=0.0, restore_s=0.0, restart_s=0.0, finalization_s=0.0)
    out = kill_schedule_goodput(_train(3), [6, 10], unit_steps)
    assert (out["attempts"], out["saves"], out["steps_redone"]) == (3, 3, 3)
    assert out["wall_s"] == 15.0 and out["goodput"] == pytest.approx(12 / 15)
    # A kill before the first save starts again at step 0; no kill: no redone step, no restart.
    assert kill_schedule_goodput(_train(6), [5], unit_steps)["steps_redone"] == 5
    assert kill_schedule_goodput(_train(3), [], unit_steps)["goodput"] == 1.0


def test_a_kill_schedule_adds_each_cost_where_it_is_paid():
    costs = KillCosts(step_s=0.5, save_s=0.2, startup_s=10.0, restore_s=0.3, restart_s=4.0, finalization_s=1.0)
    out = kill_schedule_goodput(_train(10, steps=50), [19, 38], costs)
    # Saves after steps 11, 21, 31, 41: the kill at 19 resumes at 12 (7 redone), the one at 38 at 32 (6).
    assert (out["saves"], out["steps_redone"]) == (4, 13)
    wall = 10.0 + 50 * 0.5 + 13 * 0.5 + 4 * 0.2 + 2 * (4.0 + 0.3) + 1.0
    assert out["wall_s"] == pytest.approx(wall) and out["goodput"] == pytest.approx(25.0 / wall)
    # A save in an attempt that a kill then ends is made once: the next attempt resumes after it.
    assert kill_schedule_goodput(_train(4, steps=50), [19, 38], costs)["saves"] == 12
    assert kill_schedule_goodput(_train(20, steps=50), [19, 38], costs)["steps_redone"] == 19 + 16


def test_the_plan_section_rounds_the_interval_to_whole_steps_and_counts_the_restart():
    section = plan_failures(step_time_s=2.0, save_s=50.0, read_s=30.0, restart_s=120.0, node_mtbf_h=100.0, nodes=10)
    assert section["job_mtbf_h"] == 10.0 and section["restart_s"] == 150.0 and section["restart_counts_startup"]
    assert section["checkpoint_every"] == round(daly_interval_s(50.0, 36_000.0) / 2.0)
    assert section["interval_s"] == 2.0 * section["checkpoint_every"]
    assert section["goodput"] == pytest.approx(daly_goodput(section["interval_s"], 50.0, 150.0, 36_000.0))
    assert usd_per_mtoken(36.0, 2, 1000.0) == pytest.approx(20.0)  # $72/h over 3.6M tokens/h
    assert usd_per_mtoken(36.0, 2, 1000.0, goodput=0.5) == pytest.approx(40.0)
    assert usd_per_mtoken(None, 2, 1000.0) is None


def test_counts_parse_with_suffixes_and_nothing_else():
    assert [parse_count(t) for t in ("2T", "1.5B", "3g", "10M", "7K", "5e11")] == [2e12, 1.5e9, 3e9, 1e7, 7e3, 5e11]
    for bad in ("", "T", "2X", "-1T", "0", "nan", "inf"):
        with pytest.raises(ValueError):
            parse_count(bad)


LLAMA_70B = (
    "model=llama2-70b", "cluster=p5.48xlarge", "nodes=16", "gpus_per_node=8", "precision=bf16",
    "train.activation_checkpointing=full", "train.micro_batch=1",
)  # fmt: skip


def test_70b_on_16_p5_nodes_at_a_node_mtbf_of_6300_h():
    rc, out, err, _ = in_process(
        "plan", *LLAMA_70B, "cluster.node_mtbf_h=6300", "cluster.usd_per_node_hour=50", "--tokens", "2T",
        "--fields", "tokens_per_s,checkpoint.write_s,failures,cost,to_train",
    )  # fmt: skip
    assert rc == 0, err
    (plan,) = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    failures, cost, train = plan["failures"], plan["cost"], plan["to_train"]
    assert failures["job_mtbf_h"] == pytest.approx(393.75)
    assert failures["young_interval_s"] == pytest.approx(math.sqrt(2 * plan["checkpoint.write_s"] * 393.75 * 3600))
    assert 0.98 < failures["goodput"] < 1.0  # about 1 % to saves and redone work, before restart costs
    assert not failures["restart_counts_startup"]  # cluster.restart_s unset: the restore alone
    assert train["hours"] == pytest.approx(2e12 / (plan["tokens_per_s"] * failures["goodput"]) / 3600)
    assert train["usd"] == pytest.approx(train["hours"] * 50 * 16)
    assert cost["usd_per_mtoken"] == pytest.approx(50 * 16 / 3600 / (plan["tokens_per_s"] * failures["goodput"]) * 1e6)
    assert cost["price_source"] is None  # a price given on the command line names no source


@pytest.mark.parametrize(
    ("cluster", "price"),
    [("p4d.24xlarge", 21.957642), ("p4de.24xlarge", 27.44705), ("p5.48xlarge", 55.04), ("p5en.48xlarge", 63.296),
     ("p5e.48xlarge", None), ("h100-8x", None)],
)  # fmt: skip
def test_the_aws_presets_carry_awss_on_demand_price_with_its_source_and_date(cluster, price):
    rc, out, err, _ = in_process("plan", "model=debug", f"cluster={cluster}", "nodes=2", "--json")
    assert rc == 0, err
    (plan,) = json.loads(out)
    if price is None:  # p5e: AWS publishes no on-demand price in us-east-1; generic presets: nobody's price
        assert "cost" not in plan
        return
    assert plan["cost"]["usd_per_node_hour"] == price
    assert plan["cost"]["price_source"].startswith("https://aws.amazon.com/ec2/pricing/on-demand/ (us-east-1, Linux")
    assert plan["cost"]["price_as_of"] == "2026-07-28"
    # A price given on the command line is the user's: the preset's source and date no longer describe it.
    rc, out, err, _ = in_process("plan", "model=debug", f"cluster={cluster}", "nodes=2", "cluster.usd_per_node_hour=9",
                                 "--json")  # fmt: skip
    (plan,) = json.loads(out)
    cost = plan["cost"]
    assert (cost["usd_per_node_hour"], cost["price_source"], cost["price_as_of"]) == (9, None, None)
    rc, out, err, _ = in_process("plan", "model=debug", f"cluster={cluster}", "nodes=2", "cluster.usd_per_node_hour=9",
                                 "cluster.price_source=our contract", "--json")  # fmt: skip
    (plan,) = json.loads(out)
    assert (plan["cost"]["price_source"], plan["cost"]["price_as_of"]) == ("our contract", None)


def test_bad_tokens_and_non_positive_rates_are_one_line_exit_2():
    rc, _, err, _ = in_process("plan", "model=debug", "--tokens", "2X")
    assert rc == 2
    assert err.strip() == (
        "error: --tokens: cannot read '2X'; allowed: a positive number with an optional suffix K, M, B/G, T (2T)"
    )
    for key in ("cluster.node_mtbf_h", "cluster.usd_per_node_hour"):
        rc, _, err, _ = in_process("plan", "model=debug", f"{key}=0")
        assert rc == 2 and f"{key}: Input should be greater than 0" in err and "Traceback" not in err


def test_a_plan_without_failure_rate_or_price_has_neither_section():
    rc, out, err, _ = in_process("plan", "model=debug", "--tokens", "1M", "--json")
    assert rc == 0, err
    (plan,) = json.loads(out)
    assert "failures" not in plan and "cost" not in plan
    assert plan["to_train"]["goodput"] == 1.0 and plan["to_train"]["usd"] is None


def test_the_reports_frame_prices_each_record_with_its_job_goodput():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
    from record_factory import make_record

    from bench.analysis.report.frame import records_to_frame
    from bench.schema.job import JobMetrics

    priced = make_record(nodes=2, tokens_per_s=1000.0, **{"cluster.usd_per_node_hour": 36.0})
    with_job = make_record(nodes=2, tokens_per_s=1000.0, sweep="b", **{"cluster.usd_per_node_hour": 36.0})
    with_job.metrics.job = JobMetrics(wall_s=10.0, job_goodput=0.5)
    unpriced = make_record(nodes=2, tokens_per_s=1000.0, sweep="c")
    assert priced.point_id == unpriced.point_id  # a price describes the node type: not in the id
    frame = records_to_frame([priced, with_job, unpriced]).set_index("sweep")
    assert frame.loc["unit", "usd_per_mtoken"] == pytest.approx(20.0)
    assert frame.loc["b", "usd_per_mtoken"] == pytest.approx(40.0)
    assert math.isnan(frame.loc["c", "usd_per_mtoken"])


def test_the_report_and_summary_md_show_dollars_per_mtoken_or_no_price(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
    from record_factory import make_record

    from reports.report.build import build_report

    priced = make_record(nodes=2, tokens_per_s=1000.0, **{"cluster.usd_per_node_hour": 36.0})
    unpriced = make_record(nodes=1, tokens_per_s=1000.0)
    build_report([priced, unpriced], tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    header = next(line for line in summary.splitlines() if line.startswith("| model | nodes"))
    assert header.endswith("| $/Mtoken |")
    rows = {line.split(" | ")[1]: line for line in summary.splitlines() if line.startswith("| debug | ")}
    assert rows["2"].endswith("| 20 |")  # $72/h over 3.6M tokens an hour
    assert rows["1"].endswith("| no price |")
    page = (tmp_path / "report.html").read_text()
    assert "$/Mtoken" in page and "no price" in page and ">20<" in page


def test_the_plan_table_shows_failures_and_cost_and_says_no_price():
    rc, out, err, _ = in_process(*("plan", *LLAMA_70B, "cluster.node_mtbf_h=6300", "cluster.usd_per_node_hour=50"))
    assert rc == 0, err
    assert "failures and cost" in out and "393.8" in out and "given, unsourced" in out
    rc, out, err, _ = in_process("plan", "model=debug", "--tokens", "1M")
    assert rc == 0, err
    assert "no price" in out
    rc, out, err, _ = in_process("plan", "model=debug")
    assert rc == 0 and "failures and cost" not in out


# plan --best by cost and time to train: nodes become a searched axis, ranked lowest first.
SEARCH = (
    "model=llama2-70b", "cluster=p5.48xlarge", "nodes=8,16,32", "strategy=full_shard", "precision=bf16",
    "train.micro_batch=1,2", "train.activation_checkpointing=full", "train.compile=false",
    "cluster.node_mtbf_h=6300", "cluster.usd_per_node_hour=50",
)  # fmt: skip


def best_json(*args) -> dict:
    rc, out, err, _ = in_process("plan", "--best", *args, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_the_cheapest_and_the_fastest_search_the_node_counts_lowest_first():
    cost = best_json(*SEARCH, "--objective", "cost", "--top", "6")
    assert cost["axes"]["nodes"] == ["8", "16", "32"]
    values = [c["cost"]["usd_per_mtoken"] for c in cost["top"]]
    assert values == sorted(values) and len({c["spec"]["nodes"] for c in cost["top"]}) > 1
    fastest = best_json(*SEARCH, "search.tokens=2T", "--objective", "time_to_train", "--top", "6")
    hours = [c["to_train"]["hours"] for c in fastest["top"]]
    assert hours == sorted(hours) and fastest["top"][0]["spec"]["nodes"] == 32  # more nodes, sooner
    # A budget drops what costs more.
    budget = fastest["top"][-1]["to_train"]["usd"] * 0.999
    limited = best_json(*SEARCH, f"search.max_usd={budget}", "--tokens", "2T", "--objective", "time_to_train")
    assert all(c["to_train"]["usd"] <= budget for c in limited["top"])


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--objective", "time_to_train"), "error: search.objective: time_to_train needs search.tokens (the tokens "
                                           "to train, e.g. search.tokens=2T)"),
        (("cluster.usd_per_node_hour=null", "--objective", "cost"), "error: search.objective: cost needs a price: "
                                                                     "cluster.usd_per_node_hour is not set for "
                                                                     "p5.48xlarge; set it"),
        (("search.tokens=2T", "search.max_hours=1", "--objective", "time_to_train"),
         "error: search: none of the 6 fitting configurations meets search.max_hours=1 (the fastest takes "),
        (("search.max_hours=0", "--objective", "time_to_train"), "error: search.max_hours: Input should be greater "
                                                                  "than 0"),
        (("search.tokens=2Q", "--objective", "time_to_train"), "error: search.tokens: cannot read '2Q'; allowed: a "
                                                               "positive number with an optional suffix K, M, B/G, "
                                                               "T (2T)"),
    ],
)  # fmt: skip
def test_a_search_it_cannot_rank_is_one_line_exit_2(args, line):
    rc, _, err, _ = in_process("plan", "--best", *SEARCH, *args)
    assert rc == 2 and err.startswith(line), err


def test_nodes_stay_one_setup_for_the_throughput_objectives():
    rc, _, err, _ = in_process("plan", "--best", *SEARCH)
    assert rc == 2 and "nodes too with search.objective cost or time_to_train" in err


def _restarted(**buckets):
    from bench.schema.job import JobMetrics

    return JobMetrics(wall_s=100.0, **buckets)


def test_the_restart_cost_measured_by_records_is_each_restart_beside_its_restore():
    from bench.analysis.planner.failures import measured_restart_s

    # 3 attempts: 16 s of program start-up of which the launch's 6, 6 s initialization and 0.6 s of
    # first steps over 3 attempts, 1 s of recovery: (1 + 10) / 2 + 6.6 / 3 = 7.7 s per restart.
    three = _restarted(
        attempts=3, program_startup_s=16.0, launch_startup_s=6.0, initialization_s=6.0, step_startup_s=0.6,
        recovery_s=1.0, restore_s=5.0,
    )  # fmt: skip
    assert measured_restart_s([three]) == pytest.approx(7.7)
    two = _restarted(attempts=2, program_startup_s=9.0, launch_startup_s=5.0, initialization_s=2.0, recovery_s=1.0)
    once = _restarted(attempts=1, program_startup_s=5.0, launch_startup_s=5.0)  # no restart: not a sample
    later_point = _restarted(attempts=2, program_startup_s=3.0, launch_startup_s=5.0)  # ambiguous: skipped
    assert measured_restart_s([two, once, later_point]) == pytest.approx(5.0 + 1.0)
    assert measured_restart_s([three, two]) == pytest.approx((7.7 + 6.0) / 2)  # the median
    assert measured_restart_s([once]) is None


def test_plan_takes_the_restart_cost_from_records_of_the_same_cluster(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
    from record_factory import make_record

    record = make_record(nodes=1)
    record.metrics.job = _restarted(attempts=2, program_startup_s=9.0, launch_startup_s=5.0, recovery_s=1.0)
    folder = tmp_path / "unit" / record.point_id
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(record.model_dump_json())
    cluster = record.spec.cluster.name
    base = ("plan", "model=debug", f"cluster={cluster}", "cluster.node_mtbf_h=100")
    fields = ("--fields", "spec.cluster.restart_s", "--restart-from", str(tmp_path))
    rc, out, err, _ = in_process(*base, *fields)
    assert rc == 0, err
    assert json.loads(out.strip().strip("[]").strip())["spec.cluster.restart_s"] == pytest.approx(5.0)
    # A restart cost given wins over the records'; a cluster without such records is refused in one line.
    rc, out, err, _ = in_process(*base, "cluster.restart_s=7", *fields)
    assert rc == 0, err
    assert json.loads(out.strip().strip("[]").strip())["spec.cluster.restart_s"] == 7.0
    other = "h100-8x" if cluster != "h100-8x" else "a100-8x"
    rc, out, err, _ = in_process("plan", "model=debug", f"cluster={other}", "--restart-from", str(tmp_path))
    assert rc == 2 and err.strip().endswith(f"no record under {tmp_path} of cluster {other} restarted after a failure")
