"""Docstrings say where things are: every package's docstring names each of its modules, and what
the docstrings name exists: every module a package's docstring lists (`name.py`, `name/`),
every file a module's docstring points at (`bench/analysis/store/sqlite.py`), every dotted name
(`bench.analysis.stats`, `bench.analysis.planner.predict`). Modules move; their descriptions must follow."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("bench/**/*.py"), *ROOT.glob("reports/**/*.py"), *ROOT.glob("fsdp_core/**/*.py")])
PACKAGES = [p for p in SOURCES if p.name == "__init__.py"]

FILE = re.compile(r"(?<![\w/.<>-])((?:\w+/)*\w+\.py)\b")  # store.py, bench/analysis/store/sqlite.py
FOLDER = re.compile(r"(?<![\w/.<>-])(\w+)/(?=[\s),.;:]|$)")  # check/, templates/ (a package's own folders)
DOTTED = re.compile(r"(?<![\w.])((?:bench|reports|fsdp_core)(?:\.\w+)+)")


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def resolves(dotted: str) -> bool:
    """A module, or a module's attribute (a function, a class)."""
    module, _, attribute = dotted.rpartition(".")
    try:
        if importlib.util.find_spec(dotted) is not None:
            return True
    except ModuleNotFoundError:
        pass
    try:
        return hasattr(importlib.import_module(module), attribute)
    except ModuleNotFoundError:
        return False


def missing_names(path: Path) -> list[str]:
    text, folder = docstring(path), path.parent
    missing = [f for f in FILE.findall(text) if not ((folder / f).exists() or (ROOT / f).exists())]
    if path.name == "__init__.py":
        missing += [f"{f}/" for f in FOLDER.findall(text) if not ((folder / f).is_dir() or (ROOT / f).is_dir())]
    return missing + [name for name in DOTTED.findall(text) if not resolves(name)]


def unnamed_modules(package: Path) -> list[str]:
    """The package's modules (`name.py`) and subpackages (`name/`) its docstring does not name."""
    text, folder = docstring(package), package.parent
    named = {Path(f).name for f in FILE.findall(text)} | {f"{f}/" for f in FOLDER.findall(text)}
    modules = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
    packages = {f"{p.parent.name}/" for p in folder.glob("*/__init__.py")}
    return sorted((modules | packages) - named)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_package_docstring_names_each_of_its_modules(package):
    """A module added to a package is described where the package describes itself."""
    assert unnamed_modules(package) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_what_a_docstring_names_exists(path):
    assert missing_names(path) == []


def test_the_check_finds_a_module_that_moved(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "here.py").write_text("")
    (package / "__init__.py").write_text('"""Modules: here.py (stays), gone.py (moved), sub/ (gone), bench.nope."""')
    assert missing_names(package / "__init__.py") == ["gone.py", "sub/", "bench.nope"]
    (package / "new.py").write_text("")
    assert unnamed_modules(package / "__init__.py") == ["new.py"]
