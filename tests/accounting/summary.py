"""Sum tests/accounting/sitecustomize.py's log: CPU seconds per test and per kind of process.

    python tests/accounting/summary.py LOG.jsonl

Kinds: `rank` (fsdp_core), `agent` (torchrun), `parent` (the fsdp-bench console script or
`python -m bench`), `pytest`, else the program's name (`python -c` for inline code: compile workers).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def kind(argv: str) -> str:
    program = argv.split(" ")[0]
    if "torch/distributed/run" in program or program.endswith("torchrun"):
        return "agent"
    if "fsdp_core" in argv:
        return "rank"
    if program.endswith("fsdp-bench") or program.endswith("bench/__main__.py"):
        return "parent"
    if "pytest" in program:
        return "pytest"
    return "python -c" if program == "-c" else Path(program).name or "python"


def summary(lines: list[dict]) -> str:
    """One row per test: its CPU seconds, then count x seconds of each kind of process."""
    tests: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for line in lines:
        test = line["test"].rsplit(" ", 1)[0] or "(outside a test)"
        row = tests[test][kind(line["argv"])]
        row[0] += 1
        row[1] += line["cpu_s"]
    rows = []
    for test, kinds in sorted(tests.items(), key=lambda item: -sum(v[1] for v in item[1].values())):
        parts = " ".join(f"{k}:{int(n)}x{s:.1f}" for k, (n, s) in sorted(kinds.items()))
        rows.append(f"{sum(s for _, s in kinds.values()):7.1f} s  {test}  {parts}")
    total = sum(line["cpu_s"] for line in lines)
    return "\n".join([*rows, f"{total:7.1f} s  in all ({len(lines)} processes)"])


if __name__ == "__main__":
    print(summary([json.loads(line) for path in sys.argv[1:] for line in Path(path).read_text().splitlines()]))
