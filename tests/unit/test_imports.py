"""Dependency direction (docs/architecture.md), checked statically and by really importing.

- fsdp_core never imports hydra, omegaconf, pydantic, pandas, bench or reports (anywhere, lazily included).
- reports never imports torch or fsdp_core, and from bench only its torch-free contract: bench.schemas
  (the records) and bench.analysis.stats (the statistics engine).
- bench imports torch only lazily: no module-level import of torch or of a torch-importing fsdp_core
  module; importing the CLI, config, schemas and every command module leaves torch unloaded.
The subprocess checks catch what the static ones cannot (an allowed import that pulls torch in).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FSDP_CORE_FORBIDDEN = {"hydra", "omegaconf", "pydantic", "pandas", "bench", "reports"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package: str) -> list[str]:
    return sorted(module_name(p) for p in (ROOT / package).rglob("*.py"))


def imported_names(path: Path, top_level_only: bool = False) -> set[str]:
    """Absolute module names a file imports (every import statement, or module-level ones only)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def roots(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


def loaded_after_import(modules: list[str], watched: list[str]) -> list[str]:
    """Import `modules` in a fresh interpreter; which of `watched` ended up in sys.modules."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(json.dumps([w for w in {watched!r} if w in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", sorted((ROOT / "fsdp_core").rglob("*.py")), ids=lambda p: p.name)
def test_fsdp_core_never_imports_orchestration_libraries(path):
    assert roots(imported_names(path)) & FSDP_CORE_FORBIDDEN == set()


REPORTS_MAY_IMPORT = ("bench.schemas", "bench.analysis.stats")


@pytest.mark.parametrize("path", sorted((ROOT / "reports").rglob("*.py")), ids=lambda p: p.name)
def test_reports_import_only_the_bench_contract_and_never_torch(path):
    names = imported_names(path)
    assert roots(names) & {"torch", "fsdp_core"} == set()
    bench_names = {n for n in names if n.split(".")[0] == "bench"}
    assert {n for n in bench_names if not n.startswith(REPORTS_MAY_IMPORT)} == set()


def torch_importing_core_modules() -> set[str]:
    """fsdp_core modules that import torch at module level (the others are safe for bench)."""
    return {module_name(p) for p in (ROOT / "fsdp_core").rglob("*.py") if "torch" in roots(imported_names(p, True))}


@pytest.mark.parametrize("path", sorted((ROOT / "bench").rglob("*.py")), ids=lambda p: module_name(p))
def test_bench_imports_torch_only_lazily(path):
    heavy = torch_importing_core_modules()
    top_level = imported_names(path, top_level_only=True)
    assert "torch" not in roots(top_level)
    assert {n for n in top_level if n in heavy or n.rsplit(".", 1)[0] in heavy} == set()


def test_importing_the_cli_and_every_command_leaves_torch_unloaded():
    commands = [m for m in package_modules("bench/cli/commands") if m != "bench.cli.commands"]
    assert "bench.cli.commands.run" in commands
    modules = ["bench.cli.main", "bench.config", "bench.schemas", *commands]
    assert loaded_after_import(modules, ["torch", "fsdp_core.model"]) == []


def test_building_the_cli_parser_leaves_torch_unloaded():
    code = "from bench.cli.main import build_parser; build_parser(); import sys; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_reports_never_load_torch():
    assert loaded_after_import(package_modules("reports"), ["torch", "fsdp_core.model"]) == []


def test_fsdp_core_never_loads_orchestration_libraries():
    loaded = loaded_after_import(package_modules("fsdp_core"), sorted(FSDP_CORE_FORBIDDEN))
    assert loaded == []
