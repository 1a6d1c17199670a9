"""One rank of a distributed test: `python rank_entry.py JOBS_JSON OUT_DIR`.

JOBS_JSON maps a name to ["module:function", {kwargs}]; every function runs on every rank
inside one gloo process group (env:// rendezvous from RANK/WORLD_SIZE/MASTER_*), and this
rank writes `OUT_DIR/rank<R>.json` = {name: the function's JSON-able result}. Running several
checks in one launch pays the torch import and rendezvous once.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import traceback
from pathlib import Path

import torch
import torch.distributed as dist


def run_jobs(jobs: dict[str, list]) -> dict[str, object]:
    functions = {}
    for name, (target, _) in jobs.items():
        module_name, function_name = target.split(":")
        functions[name] = getattr(importlib.import_module(module_name), function_name)
    gc.freeze()  # as fsdp_core/worker.py: the imported modules' objects are never garbage, never walk them
    results = {}
    for name, (_, kwargs) in jobs.items():
        results[name] = functions[name](**kwargs)
        dist.barrier()  # the next job starts from a quiet process group
    return results


def main(argv: list[str]) -> int:
    jobs, out_dir = json.loads(argv[0]), Path(argv[1])
    # Ranks share two cores with other tests: one thread each never oversubscribes.
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        results = run_jobs(jobs)
    except BaseException:  # noqa: BLE001 - report and leave without tearing down a broken group
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    (out_dir / f"rank{dist.get_rank()}.json").write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
