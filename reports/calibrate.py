"""What `fsdp-bench calibrate` shows: the measured rates in a few lines, and the cluster file of a
preflight's measured links (`--from-preflight`), written for a person's config folder."""

from __future__ import annotations

from pathlib import Path


def calibration_lines(data: dict) -> list[str]:
    """Human-readable lines of what was measured (bench/run/calibrate.py's document)."""
    lines = []
    for dtype, by_threads in data["matmul_gflops"].items():
        cells = ", ".join(f"{t} thread(s) {v:.1f}" for t, v in by_threads.items())
        lines.append(f"matmul {dtype}: {cells} GFLOP/s")
    step = data["model_step"]
    cells = ", ".join(f"{p['processes']}x{p['threads']}: {p['gflops_per_process']:.1f}" for p in step["patterns"])
    lines.append(f"training step ({step['model']}, fp32), processes x threads at once: {cells} GFLOP/s per process")
    lines.append(f"AdamW streaming: {data['optimizer_gbps']:.2f} GB/s")
    busy = data.get("collectives_busy", {})
    for kind, fit in data["collectives"].items():
        line = f"gloo {kind}: {fit['gbps']:.2f} Gb/s, latency {1e6 * fit['latency_s']:.0f} us per ring step"
        if kind in busy:
            line += f" (cores busy: {busy[kind]['gbps']:.2f} Gb/s, {1e6 * busy[kind]['latency_s']:.0f} us)"
        lines.append(line)
    lines.append(f"host memory: {data['memory_gib']:.1f} GiB shared by all local ranks")
    return lines


def write_cluster_file(record, path: Path) -> str:
    """`path` (DIR/cluster/NAME.yaml): a cluster named NAME with the links `record` (a preflight)
    measured; returns what was written."""
    from bench.analysis.planner.from_preflight import cluster_yaml
    from bench.schema.files import write_text_atomic

    text = cluster_yaml(record, path.stem)
    write_text_atomic(path, text)
    return text
