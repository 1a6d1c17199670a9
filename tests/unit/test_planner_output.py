"""What `fsdp-bench plan` prints: one plan object per point in every form (`--json`, `--fields`,
`--best --json`, the sweep's stored predictions), the JSON text, the compact table and its CSV."""

from __future__ import annotations

import csv
import json
import random
import struct

import pytest
from bench_cli import in_process

from bench.analysis.planner import predict, predict_grid
from bench.analysis.planner.skip import plan_points
from bench.config.compose import load_grid
from reports.plan import COMPACT_ABOVE, CSV_FIELDS
from reports.plan_json import plan_json

# 2 strategies x 2 precisions x 4 micro-batches x 3 grad_accum x 2 modes x 2 node counts = 192 points,
# x 2 sequences = 384: past COMPACT_ABOVE.
CPU_GRID = (
    "model=debug",
    "nodes=1,2",
    "strategy=full_shard,no_shard",
    "precision=fp32,bf16",
    "train.micro_batch=1,2,4,8",
    "train.grad_accum=1,2,4",
    "train.activation_checkpointing=none,full",
)
LARGE_CPU_GRID = (*CPU_GRID, "train.seq_len=32,64")
# A search over the micro-batch alone: 3 configurations.
ONE_AXIS = ("model=debug", "strategy=full_shard", "precision=fp32", "train.activation_checkpointing=none")


def run_plan(*argv: str) -> tuple[int, str, str]:
    code, out, err, _ = in_process("plan", *argv)
    return code, out, err


def specs_of(*overrides: str):
    return [point.spec for point in load_grid(list(overrides))]


def test_every_form_prints_the_same_plan_object():
    specs = specs_of("model=debug", "nodes=1,2")
    code, out, _ = run_plan("model=debug", "nodes=1,2", "--json")
    printed = json.loads(out)
    assert code == 0
    assert [p["point_id"] for p in printed] == [spec.point_id for spec in specs]
    assert list(printed[0])[:3] == ["point_id", "spec", "model_info"]
    # The sweep stores exactly what plan prints (sweep.plan=true), keyed by the same ids.
    stored = plan_points(specs)
    assert list(stored) == [p["point_id"] for p in printed] and list(stored.values()) == printed
    # The objects are the planner's prediction with the id first: nothing else added or lost.
    assert {k: v for k, v in printed[0].items() if k != "point_id"} == predict(specs[0])


def test_best_json_ranks_plan_objects():
    setup = (*ONE_AXIS, "train.micro_batch=1,2,4")
    code, out, _ = run_plan("--best", "--json", "--top", "1", *setup)
    found = json.loads(out)
    assert code == 0
    top, following = found["top"][0], found["next"]
    assert list(top)[:3] == ["point_id", "rank", "spec"]
    assert top["rank"] == 1 and [c["rank"] for c in following] == [2]
    assert list(following[0])[:4] == ["point_id", "rank", "reason", "spec"]
    # Each entry is the plan object `plan --json` prints for that configuration, plus its rank.
    mb, gpus = top["spec"]["train"]["micro_batch"], top["spec"]["gpus_per_node"]
    code, out, _ = run_plan("--json", *ONE_AXIS, f"train.micro_batch={mb}", f"gpus_per_node={gpus}")
    (alone,) = json.loads(out)
    assert {k: v for k, v in top.items() if k != "rank"} == alone


def test_fields_picks_dotted_keys():
    code, out, _ = run_plan("model=debug", "nodes=1,2", "--json")
    full = json.loads(out)
    fields = "point_id,fits,tokens_per_s,memory_bytes_per_device.total,spec.model.name,scaling_efficiency"
    code, out, err = run_plan("model=debug", "nodes=1,2", "--fields", fields)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == 4  # one object per line
    picked = json.loads(out)
    assert picked == [
        {
            "point_id": p["point_id"],
            "fits": True,
            "tokens_per_s": p["tokens_per_s"],
            "memory_bytes_per_device.total": p["memory_bytes_per_device"]["total"],
            "spec.model.name": "debug",
            "scaling_efficiency": p["scaling_efficiency"],
        }
        for p in full
    ]
    assert picked[0]["scaling_efficiency"] is None and 0 < picked[1]["scaling_efficiency"] <= 1


def test_best_fields_picks_from_each_ranked_configuration():
    setup = (*ONE_AXIS, "train.micro_batch=1,2,4", "--top", "2")
    _, out, _ = run_plan("--best", "--json", *setup)
    full = json.loads(out)
    code, out, _ = run_plan("--best", "--fields", "rank,point_id,tokens_per_s", *setup)
    picked = json.loads(out)
    assert code == 0
    assert picked["top"] == [{"rank": c["rank"], "point_id": c["point_id"], "tokens_per_s": c["tokens_per_s"]} for c in full["top"]]  # fmt: skip
    assert [c["rank"] for c in picked["top"] + picked["next"]] == [1, 2, 3]
    assert picked["searched"] == full["searched"] == 3


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--fields", "point_id,memory.total_gib"), "--fields: unknown field 'memory.total_gib'"),
        (("--fields", "tokens_per_sec"), "--fields: unknown field 'tokens_per_sec' (did you mean tokens_per_s?)"),
        (("--fields", ""), "--fields: no field given"),
        (("--csv", "."), "--csv: . is a folder; give a file; allowed: a file path"),
        (("--best", "--csv", "plan.csv"), "--csv: writes a grid's points; with --best use --json or --fields"),
    ],
)
def test_bad_output_flags_are_one_line_exit_2(argv, expected):
    code, out, err = run_plan("model=debug", *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {expected}")
    if argv[0] == "--fields" and argv[1]:
        # The allowed ones, named: every leaf of the object, the resolved spec as one entry.
        assert "; allowed: point_id, spec.<any key of the resolved spec, e.g. spec.model.name>, " in err
        assert ", memory_bytes_per_device.total, " in err and ", tokens_per_s, " in err
        assert "spec.train" not in err


def test_plan_json_is_the_standard_librarys_text():
    gpu = specs_of(
        "cluster=p5.48xlarge",
        "model=llama2-7b,llama3-8b",
        "nodes=1,2",
        "strategy=full_shard,hybrid_shard",
        "precision=bf16,fp8",
        "train.checkpoint=none,sync",
    )
    plans = predict_grid(gpu) + predict_grid(specs_of(*CPU_GRID[:3]))
    assert plan_json(plans) == json.dumps(plans, indent=2)
    # Floats over the whole double range, the decade where encoders differ (1e-05 to 1e-04) most of
    # all, beside numbers that end in it (10.00001), and strings that look like numbers or need escapes.
    rng = random.Random(0)
    values = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20_000)]
    values += [10 ** rng.uniform(-7, -3) * rng.choice((1, -1, 1e5)) for _ in range(20_000)]
    values += [10.00001, -100.00005, 1e-05, 9.999999999999999e-05, 0.0001, -0.0, 5e-324, 2**70]
    data = [{"v": v, "nested": [v, {"again": v}], "s": " 0.00001", "t": "e-5"} for v in values]
    data.append({"text": 'DEL \x7f NUL \x00 é 😀 ", 1e-6'})
    assert plan_json(data) == json.dumps(data, indent=2)
    assert plan_json([]) == "[]"


def test_a_large_plan_prints_compactly_with_every_point_in_a_csv(tmp_path):
    path = tmp_path / "plan.csv"
    code, out, _ = run_plan(*LARGE_CPU_GRID, "--json")
    plans = json.loads(out)
    assert code == 0 and len(plans) == 384 > COMPACT_ABOVE
    code, out, _ = run_plan(*LARGE_CPU_GRID, "--csv", str(path))
    assert code == 0
    fitting = sum(p["fits"] for p in plans)
    assert f"fsdp-bench plan: 384 points, {fitting} predicted to fit, {384 - fitting} not" in out
    assert (
        "varies: nodes (2), strategy (2), precision (2), train.seq_len (2), train.micro_batch (4), "
        "train.grad_accum (3), train.activation_checkpointing (2)\n" in out
    )
    assert f"every point, one row each: {path}" in out
    assert "memory per device (GiB)" not in out  # not the full table
    # One row per setup (model, cluster, world shape, sequence): its fastest fitting configuration.
    assert "fastest configuration that fits, per setup (4 setups)" in out
    rows = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == "debug":
            rows[cells[2], cells[3]] = cells
    gpus = plans[0]["spec"]["gpus_per_node"]
    assert sorted(rows) == [(f"{n}x{gpus}", s) for n in ("1", "2") for s in ("32", "64")]
    for nodes in (1, 2):
        for seq in (32, 64):
            members = [p for p in plans if p["spec"]["nodes"] == nodes and p["spec"]["train"]["seq_len"] == seq]
            best = max((p for p in members if p["fits"]), key=lambda p: p["tokens_per_s"])
            train = best["spec"]["train"]
            label = f"{best['spec']['strategy']} {best['spec']['precision']} mb={train['micro_batch']} ga={train['grad_accum']} ac={train['activation_checkpointing']}"  # fmt: skip
            cells = rows[f"{nodes}x{gpus}", str(seq)]
            assert cells[4:8] == ["96", str(sum(p["fits"] for p in members)), label, f"{best['tokens_per_s']:,.0f}"]
    # The CSV: every point, the plan object's fields as columns, raw numbers.
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["point", *CSV_FIELDS]
    assert [r["point_id"] for r in rows] == [p["point_id"] for p in plans]
    for row, p in zip(rows, plans):
        assert float(row["tokens_per_s"]) == p["tokens_per_s"]
        assert int(row["memory_bytes_per_device.total"]) == p["memory_bytes_per_device"]["total"]
        assert row["fits"] == str(p["fits"]) and row["mfu"] == ""  # CPU: no datasheet peak


def test_a_small_plan_prints_the_full_tables(tmp_path):
    code, out, _ = run_plan("model=debug", "nodes=1,2")
    assert code == 0
    assert "fsdp-bench plan: predicted per point" in out and "memory per device (GiB)" in out
    assert "every point" not in out  # no CSV unless asked
    path = tmp_path / "small.csv"
    code, out, _ = run_plan("model=debug", "nodes=1,2", "--csv", str(path))
    assert code == 0 and f"every point, one row each: {path}" in out
    assert len(path.read_text().splitlines()) == 3
