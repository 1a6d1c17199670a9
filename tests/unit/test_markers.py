"""The `ranks` and `postgres` markers stay true: read statically from the test files, without running anything.

An e2e test carries `postgres` exactly when it takes the PostgreSQL server fixture (POSTGRES_FIXTURE of
tests/e2e/test_store_postgres.py), itself or through a fixture or helper of its file.

Every test in tests/distributed starts ranks (through its fixtures or itself) and carries `ranks`.
An e2e test carries it exactly when it may start ranks: when it, a helper it calls or a fixture it
takes runs a rank-starting command (`run`, `sweep`, `preflight`, `ab`, `calibrate`) as a process of
its own (tests/bench_cli.py's `fsdp_bench`, `run_separately`, `start`), or starts ranks directly
(tests/distributed/dist_helpers.py), or is named in INDIRECT. A call whose command is not a literal (a helper passing its
own `command` on) counts as starting ranks. In-process calls (`in_process`) start none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
RANK_COMMANDS = frozenset({"run", "sweep", "preflight", "ab", "calibrate"})
# Calls that run `fsdp-bench ARGS` as a process when ARGS' command starts ranks (bench_cli.py; the
# in-process `fsdp_bench` mode is chosen by the command, so rank commands always get a process).
CLI_CALLS = frozenset({"fsdp_bench", "run_separately", "start", "start_cli", "installed_cli"})
RANK_CALLS = frozenset({"run_ranks", "run_engine"})
POSTGRES_FIXTURE = "postgres_server"  # dist_helpers: ranks without the CLI
# Tests that start ranks where no call in their file shows it.
INDIRECT = {
    "test_pytest_plugin_records_tokens_per_s_in_benchmark_json": "a pytest whose fsdp_point fixture runs a point",
    "test_ranks_of_an_abandoned_launch_write_nothing": "LocalLauncher().launch of a prepared launch",
    "nightly_pipelines": "tests/ci_runner.py runs ci/nightly.sh, whose `fsdp-bench sweep` starts a rank",
}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _may_start_ranks(call: ast.Call) -> bool:
    """Whether this call starts ranks by itself (not through a helper defined in the test file)."""
    name = _called_name(call)
    if name in RANK_CALLS:
        return True
    if name not in CLI_CALLS or not isinstance(call.func, ast.Name):  # `sampler.start()` is no CLI
        return False
    if any(k.arg == "separate" and isinstance(k.value, ast.Constant) and k.value.value is False for k in call.keywords):
        return False
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    at = 1 if name == "installed_cli" else 0  # installed_cli(SCRIPT, COMMAND, ...)
    if len(positional) <= at:
        return True  # the command comes in *args: assume the worst
    command = positional[at]
    if isinstance(command, ast.Constant):
        return command.value in RANK_COMMANDS
    return True  # a helper passing its own command on: assume the worst


class _Module:
    """A test file's functions: what each calls and takes, and which start ranks themselves."""

    def __init__(self, path: Path):
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.functions = {
            node.name: node for node in ast.walk(self.tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }

    def starts_ranks(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in INDIRECT:
            return True
        node = self.functions.get(name) or _CONFTEST_FUNCTIONS.get(name)
        if node is None or name in seen:
            return False
        seen = seen | {name}
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
        if any(self.starts_ranks(p, seen) for p in params):  # fixtures it takes
            return True
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            if _may_start_ranks(call):
                return True
            callee = _called_name(call)
            if callee in self.functions and callee not in CLI_CALLS and self.starts_ranks(callee, seen):
                return True
        return False

    def uses_postgres(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether the test (or fixture) takes the PostgreSQL server, or calls a function of its file that does."""
        node = self.functions.get(name)
        if node is None or name in seen:
            return False
        seen = seen | {name}
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
        callees = [_called_name(call) for call in ast.walk(node) if isinstance(call, ast.Call)]
        return POSTGRES_FIXTURE in params or any(self.uses_postgres(n, seen) for n in [*params, *callees] if n)

    def marked(self, name: str, marker: str) -> bool:
        def names(expr: ast.expr) -> set[str]:
            items = expr.elts if isinstance(expr, ast.List | ast.Tuple) else [expr]
            found = set()
            for item in items:
                target = item.func if isinstance(item, ast.Call) else item
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "pytest.mark":
                    found.add(target.attr)
            return found

        module_marks = set()
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in stmt.targets):
                module_marks |= names(stmt.value)
        return marker in module_marks | set().union(*(names(d) for d in self.functions[name].decorator_list))

    def tests(self) -> list[str]:
        return [
            stmt.name for stmt in self.tree.body if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("test_")
        ]


_CONFTEST_FUNCTIONS = {
    node.name: node
    for conftest in (TESTS / "conftest.py", TESTS / "distributed" / "conftest.py")
    for node in ast.parse(conftest.read_text()).body
    if isinstance(node, ast.FunctionDef) and node.name != "fsdp_bench"
}


@pytest.mark.parametrize("marker", ["ranks", "postgres"])
def test_the_marker_is_declared(marker):
    import tomllib

    markers = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith(f"{marker}:") for m in markers), markers


@pytest.mark.parametrize("path", sorted((TESTS / "distributed").glob("test_*.py")), ids=lambda p: p.name)
def test_every_distributed_test_carries_ranks(path):
    module = _Module(path)
    assert [t for t in module.tests() if not module.marked(t, "ranks")] == []


# What each e2e marker means: the tests that must carry it (starting ranks; taking the PostgreSQL server).
E2E_RULES = {"ranks": "starts_ranks", "postgres": "uses_postgres"}


@pytest.mark.parametrize("marker", sorted(E2E_RULES))
@pytest.mark.parametrize("path", sorted((TESTS / "e2e").glob("test_*.py")), ids=lambda p: p.name)
def test_an_e2e_test_carries_its_marker_exactly_when_the_rule_says(path, marker):
    module = _Module(path)
    needs = getattr(module, E2E_RULES[marker])
    unmarked = [t for t in module.tests() if needs(t) and not module.marked(t, marker)]
    needless = [t for t in module.tests() if module.marked(t, marker) and not needs(t)]
    assert (unmarked, needless) == ([], [])


def test_the_postgres_fixture_is_where_the_rule_looks():
    assert f"def {POSTGRES_FIXTURE}(" in (TESTS / "e2e" / "test_store_postgres.py").read_text()


def test_tests_elsewhere_start_no_ranks():
    """tests/unit (fresh interpreters for import checks only) and tests/gpu's own marker aside."""
    for path in sorted((TESTS / "unit").glob("test_*.py")):
        module = _Module(path)
        assert [t for t in module.tests() if module.starts_ranks(t)] == [], path.name


if __name__ == "__main__":  # list what the rule sees
    for folder in ("e2e", "distributed"):
        for path in sorted((TESTS / folder).glob("test_*.py")):
            module = _Module(path)
            for test in module.tests():
                print(folder, path.name, test, module.starts_ranks(test), module.marked(test, "ranks"))
