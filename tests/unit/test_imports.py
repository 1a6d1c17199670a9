"""The import rules of docs/architecture.md.

- The layer contracts in `.importlinter` (layers, forbidden, acyclic siblings), checked with
  import-linter's own engine, in this process (the same check as `make lint`'s `lint-imports`).
- No module imports another module's private (`_`-prefixed) names.
- What the contracts cannot see, checked by really importing in fresh interpreters: the run layer
  imports torch only lazily, so the CLI, every command and the schema leave torch unloaded; the
  ranks' modules never load an orchestration library.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where the private-name rule applies: the packages and the scripts and benchmarks that use them.
CHECKED_TREES = ("bench", "reports", "fsdp_core", "scripts", "benchmarks", "tests")
OUR_PACKAGES = ("bench", "reports", "fsdp_core")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package: str) -> list[str]:
    return sorted(module_name(p) for p in (ROOT / package).rglob("*.py") if p.name != "__main__.py")


def test_the_layer_contracts_hold():
    """Every contract of .importlinter is kept (a broken one is printed with the imports that break it)."""
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()  # what the lint-imports command does first: the readers of .importlinter and its contract types
    assert lint_imports(config_filename=str(ROOT / ".importlinter"), cache_dir=None, no_logo=True)


def test_the_contracts_cover_every_layer_and_the_ranks():
    text = (ROOT / ".importlinter").read_text()
    layers = [p.name for p in (ROOT / "bench").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert sorted(layers) == sorted(["schema", "config", "analysis", "run", "cli"])
    assert (ROOT / "reports" / "__init__.py").exists() and "\n    reports\n" in text
    assert "exhaustive = True" in text and "type = acyclic_siblings" in text and "fsdp_core" in text
    assert "type = independence" in text and "bench.cli.commands.*" in text


def private_imports(path: Path) -> list[str]:
    """`from ours import _name` and `ours_module._name` uses in one file."""
    tree = ast.parse(path.read_text())
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in OUR_PACKAGES:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{node.module}.{alias.name}")
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in OUR_PACKAGES)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names():
    offenders = {
        str(path.relative_to(ROOT)): names
        for tree in CHECKED_TREES
        for path in sorted((ROOT / tree).rglob("*.py"))
        if (names := private_imports(path))
    }
    assert offenders == {}


def test_the_private_name_check_sees_both_forms(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from bench.config import compose\nfrom bench.analysis.stats import _resample_plan\ncompose._parse('x')\n"
    )
    assert private_imports(sample) == ["bench.analysis.stats._resample_plan", "compose._parse"]


def loaded_after_each(groups: list[list[str]], watched: list[str]) -> list[list[str]]:
    """Import the groups of modules one after another in one fresh interpreter; which of `watched`
    were in sys.modules after each group (and every group before it).

    Imports only ever add modules, so what a group loads on its own is a subset of what the
    snapshot after it holds: an empty snapshot is the same promise as a fresh interpreter per
    group, for one interpreter start instead of several.
    """
    code = (
        "import importlib, json, sys\n"
        "after = []\n"
        f"for group in {groups!r}:\n"
        "    for name in group: importlib.import_module(name)\n"
        f"    after.append([w for w in {watched!r} if w in sys.modules])\n"
        "print(json.dumps(after))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def orchestration_modules() -> list[str]:
    """The CLI, every command, the run layer and the schema."""
    commands = [m for m in package_modules("bench/cli/commands") if m != "bench.cli.commands"]
    assert "bench.cli.commands.run" in commands
    modules = ["bench.cli.main", *commands, *package_modules("bench/run"), *package_modules("bench/schema")]
    return [m for m in modules if m not in ("bench.run.launch.ray_job",)]  # the Ray driver: it is a rank's parent


TORCH = ["torch", "fsdp_core.model"]
TORCH_FREE_GROUPS = {"cli": orchestration_modules, "analysis": lambda: package_modules("bench/analysis"),
                     "reports": lambda: package_modules("reports")}  # fmt: skip


@pytest.fixture(scope="module")
def torch_loaded_after() -> dict[str, list[str]]:
    """Group name -> the torch modules loaded once it (and the groups before it) were imported."""
    names = list(TORCH_FREE_GROUPS)
    snapshots = loaded_after_each([TORCH_FREE_GROUPS[name]() for name in names], TORCH)
    return dict(zip(names, snapshots))


def test_importing_the_cli_every_command_and_the_run_layer_leaves_torch_unloaded(torch_loaded_after):
    assert torch_loaded_after["cli"] == []


def test_building_the_cli_parser_leaves_torch_unloaded():
    code = "from bench.cli.main import build_parser; build_parser(); import sys; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


@pytest.mark.parametrize("layer", ["analysis", "reports"])
def test_the_analysis_and_presentation_layers_never_load_torch(torch_loaded_after, layer):
    assert torch_loaded_after[layer] == []


ORCHESTRATION = ["hydra", "omegaconf", "pandas", "matplotlib", "jinja2", "rich", "scipy", "bench.config", "bench.run"]
LAZY_IN_THE_WORKER = ["torch.distributed.checkpoint", "fsdp_core.checkpoint", "fsdp_core.compile_stats"]


@pytest.fixture(scope="module")
def ranks_imports() -> dict[str, list[str]]:
    """One interpreter (torch loads once): the worker alone first, then every fsdp_core module."""
    worker, everything = loaded_after_each([["fsdp_core.worker"], package_modules("fsdp_core")],
                                           LAZY_IN_THE_WORKER + ORCHESTRATION)  # fmt: skip
    return {"worker": [m for m in worker if m in LAZY_IN_THE_WORKER], "fsdp_core": everything}


def test_the_ranks_modules_never_load_orchestration_libraries(ranks_imports):
    assert [m for m in ranks_imports["fsdp_core"] if m in ORCHESTRATION] == []


def test_the_worker_leaves_checkpointing_and_compile_stats_to_the_points_that_use_them(ranks_imports):
    """Every rank imports the worker; DCP and compile_stats load only for a point that checkpoints or
    compiles (fsdp_core/worker.py), not in every rank of every launch."""
    assert ranks_imports["worker"] == []


def test_help_and_shell_completion_load_neither_torch_nor_hydra():
    """Completion runs a fresh fsdp-bench at each TAB, and --help lists the registry: neither composes."""
    code = (
        "import contextlib, io, sys\n"
        "from bench.cli.completion import complete_override\n"
        "from bench.cli.main import build_parser, main\n"
        "build_parser()\n"
        "for prefix in ('', 'model=', 'train.', 'train.checkpoint=', 'sweep.orphans='): complete_override(prefix)\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main(['sweep', '--help'])\n"
        "print([m for m in ('torch', 'hydra', 'omegaconf') if m in sys.modules])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_the_history_page_is_drawn_without_pandas():
    """history's worker pool (bench/cli/commands/history.py) imports the detector and the figures'
    drawing, and so does the command for a small store: pandas is not among what they load (the
    page needs none of it)."""
    groups = [["bench.analysis.history.detect", "reports.history.plots", "reports.history.draw"]]
    assert loaded_after_each(groups, ["pandas", "matplotlib"]) == [["matplotlib"]]
