"""The `fsdp-bench` console script: one subcommand per module in bench/cli/commands/.

Each command module defines `HELP`, `add_arguments(parser)` and `main(args) -> int`, and
imports nothing heavy at module level, so `fsdp-bench --help` and `plan` start fast.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import sys

from bench.config.problems import did_you_mean

# command -> module; a module that does not exist yet is simply not offered.
COMMANDS = {
    "run": "bench.cli.commands.run",
    "preflight": "bench.cli.commands.preflight",
    "sweep": "bench.cli.commands.sweep",
    "report": "bench.cli.commands.report",
    "check": "bench.cli.commands.check",
    "baseline": "bench.cli.commands.baseline",
    "ab": "bench.cli.commands.ab",
    "plan": "bench.cli.commands.plan",
    "calibrate": "bench.cli.commands.calibrate",
    "cancel": "bench.cli.commands.cancel",
    "store": "bench.cli.commands.store",
    "history": "bench.cli.commands.history",
}


class Help(argparse.Action):
    """`-h/--help` of every command; a command that composes configs (`lists_configs`, set by
    bench/cli/options.py `add_overrides`) adds every group with its options, the experiments and
    the keys (bench/config/catalog.py), the folders of a `--config-dir` given before it and of
    FSDP_BENCH_CONFIG_DIR included. Nothing is composed."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(parser, "lists_configs", False):
            from bench.config.catalog import help_text
            from bench.config.registry import RegistryError, add_user_dirs

            try:
                add_user_dirs(getattr(namespace, "config_dir", None) or [])
                parser.epilog = help_text()
            except RegistryError as exc:
                parser.error(str(exc))
        parser.print_help()
        parser.exit()


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    """`-h/--help`, and `--config-dir DIR` on every command: Hydra's flag and meaning (DIR joins the
    config search path)."""
    parser.add_argument("-h", "--help", action=Help, help="show this help message and exit")
    parser.add_argument(
        "--config-dir",
        "-cd",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of your own configs (model/, cluster/, device/, experiment/, ...) searched after the "
        "shipped ones; repeatable; also FSDP_BENCH_CONFIG_DIR",
    )


class _VersionAction(argparse.Action):
    """`--version`: the package version, plus the commit when run from a checkout (bench/config/version.py).

    Resolved only when asked (it may run git), unlike argparse's own version action.
    """

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from bench.config.version import harness_version

        print(f"fsdp-bench {harness_version()}")
        parser.exit()


class CommandLineParser(argparse.ArgumentParser):
    """argparse's parser, with errors that point at what was meant.

    - An unknown flag is refused by the parser of the command it was given to, under that
      command's usage (`fsdp-bench sweep: error: unrecognized arguments: --dryrun`), with the
      closest flag of that command suggested; argparse's own top-level parse would say it under
      the usage of all twelve commands.
    - An unknown command gets the closest command suggested.
    """

    def __init__(self, *args, **kwargs) -> None:
        self.commands: dict[str, CommandLineParser] = {}
        self.lists_configs = False
        self.flags: list[str] = []  # every option string, for suggestions (argparse adds -h here)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.flags += action.option_strings
        return action

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self.commands.get(getattr(parsed, "command", None) or "", self)
            flag = next((word for word in unknown if word.startswith("-")), "")
            hint = did_you_mean(flag.partition("=")[0], command.flags) if flag else ""
            command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
        return parsed

    def error(self, message: str):
        if self.commands:
            word = re.match(r"argument command: invalid choice: '([^']*)'", message)
            if word and (hint := did_you_mean(word[1], self.commands)):
                message = message.replace(f"'{word[1]}'", f"'{word[1]}'{hint}", 1)
        super().error(message)


def build_parser(only: str | None = None) -> CommandLineParser:
    """The command line's parser: every command's, or with `only` (a command's name) that command's
    alone, which parses that command's arguments alike (its help, its errors, its usage line)."""
    parser = CommandLineParser(prog="fsdp-bench", description="Scaling benchmarks for PyTorch FSDP2.")
    parser.add_argument(
        "--version", action=_VersionAction, help="print the version (with the git commit in a checkout) and exit"
    )
    # A parser of one command names them all in its usage lines, as the parser of every command does.
    every = {"metavar": "{" + ",".join(COMMANDS) + "}"} if only is not None else {}
    subparsers = parser.add_subparsers(dest="command", required=True, **every)
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP, add_help=False)
        _add_common_options(sub)
        module.add_arguments(sub)
        parser.commands[name] = sub
        sub.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and dispatch; returns the process exit code (docs/architecture.md).

    The two outcomes every command shares are decided here, once: invalid input (a ConfigError,
    one line per problem naming the key or flag) is exit 2, and a full, read-only or over-quota disk
    (bench/run/ownership/storage.py) is exit 1 with its one line.
    """
    from bench.config.problems import ConfigError
    from bench.config.registry import RegistryError, add_user_dirs
    from bench.run.ownership.storage import is_storage_error, storage_error_line

    parser = build_parser(_named_command(sys.argv[1:] if argv is None else argv))
    # At a TAB the shell's hook (argcomplete's) runs the bare console script, the line in its
    # environment: argcomplete answers and exits there, and a command with arguments never imports it.
    if argv is None and len(sys.argv) == 1:
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    try:
        add_user_dirs(args.config_dir)
        return int(args.handler(args) or 0)
    except (ConfigError, RegistryError) as exc:
        for line in getattr(exc, "lines", None) or [str(exc)]:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not is_storage_error(exc):
            raise
        print(f"error: {storage_error_line(exc)}", file=sys.stderr)
        return 1


def _named_command(argv: list[str]) -> str | None:
    """The command a command line names first (None: none, or `--help`/`--version` before it): its
    parser is built alone. Building all twelve imports every command's module and adds every option
    at each command's start, before a report can start its reader (bench/cli/commands/report.py)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


# The exit status of a process that wrote into a closed pipe (`fsdp-bench plan --json | head`): a
# shell's 128 + SIGPIPE, as the tools it was piped like would end.
BROKEN_PIPE_EXIT = 141


def entry() -> int:
    """The console script (and `python -m bench`): `main()`, then the process's own ending.

    - A reader that closed the pipe early (`| head`) ends the command quietly, without a traceback.
    - Before the interpreter exits, every object left is moved out of the collector's reach
      (`gc.freeze`): finalization runs one full collection over all live objects, which after a
      large command (a 10,080-point plan holds millions) takes time and frees nothing that exit
      would not. In-process callers (tests) call `main()` and are not affected.
    """
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python's own advice: point stdout at /dev/null so that the flush at exit fails no more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(entry())
