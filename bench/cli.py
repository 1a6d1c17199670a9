"""The `fsdp-bench` console script: one subcommand per module in bench/commands/.

Each command module defines `HELP`, `add_arguments(parser)` and `main(args) -> int`, and
imports nothing heavy at module level, so `fsdp-bench --help` and `plan` start fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> module; a module that does not exist yet is simply not offered.
COMMANDS = {
    "run": "bench.commands.run",
    "sweep": "bench.commands.sweep",
    "report": "bench.commands.report",
    "check": "bench.commands.check",
    "baseline": "bench.commands.baseline",
    "ab": "bench.commands.ab",
    "plan": "bench.commands.plan",
    "calibrate": "bench.commands.calibrate",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fsdp-bench", description="Scaling benchmarks for PyTorch FSDP2.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and dispatch; returns the process exit code (see DESIGN section 3)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
