"""The command line's parser built for the one command a line names (bench/cli/main.py): the same
parsing, help and errors as the parser of every command."""

from __future__ import annotations

import contextlib
import io

import pytest

from bench.cli.main import COMMANDS, build_parser, main


def _outcome(parser, argv: list[str]) -> tuple[str, int | None, str, str]:
    """What parsing `argv` gives: the namespace (without its handler) or the exit, and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    code, parsed = None, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(argv)
            parsed = repr(sorted((k, v) for k, v in vars(args).items() if k != "handler"))
        except SystemExit as exc:
            code = exc.code
    return parsed, code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_commands_own_parser_prints_the_same_help_as_the_whole_one(command):
    whole, alone = _outcome(build_parser(), [command, "--help"]), _outcome(build_parser(command), [command, "--help"])
    assert alone == whole
    assert alone[1] == 0 and alone[2].startswith(f"usage: fsdp-bench {command} ")


def test_a_commands_own_parser_parses_and_refuses_alike():
    for argv in (["report", "results", "-o", "out", "--no-cache"], ["report"], ["report", "x", "--bogus"],
                 ["check", "a", "b"], ["plan", "model=debug", "--json"]):  # fmt: skip
        assert _outcome(build_parser(argv[0]), argv) == _outcome(build_parser(), argv), argv
    assert "('results', 'results')" in _outcome(build_parser("report"), ["report", "results"])[0]


def test_a_line_that_names_no_command_first_is_parsed_by_every_commands_parser():
    """No command, an unknown one, or an option before it: main's errors are the whole parser's."""
    for argv, error in (([], "the following arguments are required: command"),
                        (["bogus"], "argument command: invalid choice: 'bogus'"),
                        (["--config-dir", "x", "report"], "argument command: invalid choice: 'x'")):  # fmt: skip
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and error in err.getvalue()
        assert err.getvalue() == _outcome(build_parser(), argv)[3]


def test_a_commands_own_parser_has_that_command_alone():
    (subparsers,) = [action for action in build_parser("report")._actions if action.dest == "command"]
    assert list(subparsers.choices) == ["report"]
