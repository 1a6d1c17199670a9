"""The short table `fsdp-bench preflight` prints: per-rank matmul and memory rates, the largest
message of each collective and group, stragglers and loaded hosts."""

from __future__ import annotations

from bench.schema.preflight import CollectiveSample, PreflightResult


def table_lines(record: PreflightResult) -> list[str]:
    """The short table `fsdp-bench preflight` prints."""
    lines = [f"preflight {record.spec.nodes}x{record.spec.gpus_per_node} {record.spec.cluster.name}: {record.status}"]
    if record.error:
        return [*lines, f"  error: {record.error}"]
    lines.append(f"{'rank':>5} {'host':<20} {'node':>4} {'matmul TFLOP/s':>15} {'(best)':>9} {'memory GB/s':>12}")
    for r in record.ranks:
        memory = f"{r.memory_gbps:.1f}" if r.memory_gbps else "-"
        lines.append(
            f"{r.rank:>5} {r.host[:20]:<20} {r.node:>4} {r.matmul_tflops:>15.4g} {r.matmul_best_tflops:>9.4g} {memory:>12}"
        )
    lines.append(
        f"{'collective':<15} {'group':<10} {'ranks':>5} {'bytes':>12} {'time ms':>9} {'algbw GB/s':>11} {'busbw GB/s':>11}"
    )
    largest: dict[tuple, CollectiveSample] = {}
    for s in record.collectives:
        key = (s.op, s.group, s.node)
        if key not in largest or s.bytes > largest[key].bytes:
            largest[key] = s
    order = ("world", "shard", "replicate", "node")
    for s in sorted(largest.values(), key=lambda s: (order.index(s.group), s.node or 0, s.op)):
        group = s.group if s.node is None else f"node {s.node}"
        lines.append(
            f"{s.op:<15} {group:<10} {s.group_size:>5} {s.bytes:>12,} {s.time_s * 1e3:>9.3f} {s.algbw_gbps:>11.3f} "
            f"{s.busbw_gbps:>11.3f}"
        )
    if record.stragglers:
        for s in record.stragglers:
            who = (
                f"rank {s.rank} (host {s.host}, local rank {s.local_rank})"
                if s.rank is not None
                else f"node {s.node} (host {s.host})"
            )
            lines.append(f"straggler: {who}: {s.measure} {100 * s.slower_by:.0f}% slower than the median")
    else:
        lines.append("stragglers: none")
    for host in record.host_load:
        if host.loaded:
            lines.append(
                f"loaded host: {host.host} had load {max(host.before, host.after):.1f} on {host.cores} cores while "
                f"the ranks used {host.ranks_cores}: other work shared them, so slow ranks may be interference"
            )
    return lines
