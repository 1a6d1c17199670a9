#!/usr/bin/env python
"""The 16-node p5.48xlarge anchor, planned from a preflight instead of the preset's links.

The AWS and PyTorch teams report about 87 % scaling efficiency for Llama-2 FSDP fine-tuning at 16
p5.48xlarge nodes. With the preset's nominal links (3,200 Gb/s EFA) the planner predicts 96 %. This
script builds the record a 2-node preflight would store (16 ranks: the world ring's all-gather,
reduce-scatter and all-reduce at 1 KiB and 1 GiB, each node's own all-reduce, a matmul rate) for a
given measured bus bandwidth of the world ring, through the same code a real preflight's
measurements go through (bench.analysis.preflight.from_measurements), and plans llama-recipes' setup at 1 and
16 nodes with it (`fsdp-bench plan --preflight`'s path). The inputs are stated, not measured here:
no GPU cluster is reachable from this project's machines.

    .venv/bin/python scripts/p5_anchor_from_preflight.py [--busbw 400,300,200,150,100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.analysis.planner.predict import predict  # noqa: E402
from bench.analysis.preflight import bus_factor, from_measurements  # noqa: E402
from bench.config.compose import spec_from_fields  # noqa: E402
from bench.schema.options import PreflightSettings  # noqa: E402
from bench.schema.preflight import PreflightMeasurements  # noqa: E402

SMALL, LARGE = 1024, 2**30
NVLINK_BUSBW_GBPS = 360.0  # one H100 node's all-reduce bus bandwidth inside the node, GB/s (stated input)
LATENCY_S = 30e-6  # the smallest message's time (stated input)
MATMUL_TFLOPS = 600.0  # the median rank's bf16 matmul rate at the model's shapes (stated input)


def setup(nodes: int):
    return spec_from_fields(
        model="llama2-7b", nodes=nodes, gpus_per_node=8, strategy="full_shard", precision="bf16_pure",
        cluster="p5.48xlarge", launcher="kubeflow", seq_len=4096, micro_batch=1, activation_checkpointing="full",
    )  # fmt: skip


def _seconds(op: str, size: int, n: int, busbw_gbps: float) -> float:
    return LATENCY_S if size == SMALL else size * bus_factor(op, n) / (busbw_gbps * 1e9)


def preflight_record(world_busbw_gbps: float):
    """The record of a 2x8 preflight that measured `world_busbw_gbps` on the world ring at 1 GiB."""
    spec = setup(2)
    ranks = []
    for rank in range(16):
        node = rank // 8
        collectives = [
            {"op": op, "group": "world", "group_size": 16, "bytes": size, "node": None,
             "seconds": [_seconds(op, size, 16, world_busbw_gbps)] * 3}
            for op in ("all_gather", "reduce_scatter", "all_reduce") for size in (SMALL, LARGE)
        ] + [
            {"op": "all_reduce", "group": "node", "group_size": 8, "bytes": size, "node": node,
             "seconds": [_seconds("all_reduce", size, 8, NVLINK_BUSBW_GBPS)] * 3}
            for size in (SMALL, LARGE)
        ]  # fmt: skip
        flops = 2.0 * 4096 * 4096 * 4096
        ranks.append({
            "rank": rank, "host": f"p5-{node}", "local_rank": rank % 8, "node": node,
            "matmul": {"mlp_up": {"seconds": [flops / (MATMUL_TFLOPS * 1e12)] * 3, "flops": flops}},
            "memory_gbps": 3000.0, "collectives": collectives,
        })  # fmt: skip
    return from_measurements(
        PreflightMeasurements.model_validate({"ranks": ranks}), spec, PreflightSettings(), ["full_shard"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busbw", default="400,300,200,150,100", help="world-ring bus bandwidths, GB/s")
    args = parser.parse_args()
    nominal = predict(setup(16))["tokens_per_s_per_device"] / predict(setup(1))["tokens_per_s_per_device"]
    print("llama2-7b, micro-batch 1, bf16_pure, full AC, seq 4096, full_shard, weak scaling 1 -> 16 p5.48xlarge")
    print(f"preset links (3,200 Gb/s): predicted efficiency {100 * nominal:.1f}%\n")
    print("| measured world busbw (GB/s, 2x8, 1 GiB) | inter_node_gbps the planner uses | predicted efficiency at 16 | "
          "exposed comm at 16 |")  # fmt: skip
    print("|---:|---:|---:|---:|")
    for busbw in (float(v) for v in args.busbw.split(",")):
        record = preflight_record(busbw)
        one, sixteen = predict(setup(1), record), predict(setup(16), record)
        efficiency = sixteen["tokens_per_s_per_device"] / one["tokens_per_s_per_device"]
        exposed = sixteen["step_time_split_s"]["exposed_comm"] / sixteen["step_time_s"]
        print(f"| {busbw:,.0f} | {record.measured_links['inter_node_gbps']:,.0f} | {100 * efficiency:.1f}% | "
              f"{100 * exposed:.1f}% |")  # fmt: skip


if __name__ == "__main__":
    main()
