"""The harness's profiled-step split against Holistic Trace Analysis (HTA), by hand, where HTA is installed.

    python scripts/validate_breakdown.py TRACE_DIR [--profiler-steps]

TRACE_DIR holds one rank's trace or several (`trace_rank<R>.json.gz` as fsdp-bench writes them, or
any Chrome-trace JSON torch.profiler exported). Prints, per trace, the harness's split
(fsdp_core/step_split.py: overlapped / communication over every step) and, where `hta` imports
(`pip install HolisticTraceAnalysis`; not a dependency of this project: it reads GPU kernels only and
pulls jupyterlab, plotly and networkx in), HTA's `get_comm_comp_overlap` for the same folder. HTA
drops each trace's last profiler step, so compare on traces of three or more steps; on a CPU trace
HTA has no kernels to read and says so. `--profiler-steps`: split on torch's `ProfilerStep#N` ranges
(a trace the harness did not make) instead of the harness's own step range.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fsdp_core.step_split import PROFILER_STEP, STEP_RANGE, split_trace  # noqa: E402


def harness_overlap(path: Path, step_name: str) -> tuple[int, float | None]:
    """(steps, overlapped / communication in percent, None without communication) of one trace."""
    raw = path.read_bytes()
    trace = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    steps = split_trace(trace, step_name)["steps"]
    comm = sum(s["comm_s"] for s in steps)
    return len(steps), (100 * sum(s["overlapped_comm_s"] for s in steps) / comm if comm else None)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir", type=Path)
    parser.add_argument("--profiler-steps", action="store_true")
    args = parser.parse_args(argv)
    step_name = PROFILER_STEP if args.profiler_steps else STEP_RANGE
    traces = sorted(p for p in args.trace_dir.iterdir() if p.name.endswith((".json", ".json.gz")))
    if not traces:
        parser.error(f"{args.trace_dir}: no .json or .json.gz trace")
    for path in traces:
        steps, overlap = harness_overlap(path, step_name)
        shown = "no communication" if overlap is None else f"{overlap:.2f} % of communication overlapped"
        print(f"fsdp-bench {path.name}: {steps} steps, {shown}")
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("HTA: not installed (pip install HolisticTraceAnalysis to compare)")
        return 0
    overlap = TraceAnalysis(trace_dir=str(args.trace_dir)).get_comm_comp_overlap(visualize=False)
    print(f"HTA get_comm_comp_overlap:\n{overlap}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
