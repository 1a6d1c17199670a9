"""Libraries are used through their public API only (docs/development.md, "Libraries as they ship").

An `ast` scan of the project's packages fails on
- an import of another package's private name: a `_`-prefixed part anywhere in the dotted path
  (`from hydra._internal.utils import x`, `import torch._dynamo`, `from numpy import _core`);
- an attribute read of another package's private name: a `_`-prefixed part of an attribute chain
  that starts at a name imported from another package (`torch._C._distributed_c10d`, `np._core`),
  or, on any other object, a `_`-prefixed attribute that the project never defines itself (so it
  belongs to a library's object: `ax._request_autoscale_view()`, `scaler._get_scale_async()`);
  and, anywhere, `__dict__` and pydantic's `__pydantic_*__` (a model's storage, not its API);
- a `setattr` on another package's module or class, or an assignment or `del` of one of its
  attributes (`setattr(Text, "draw", f)`, `font_manager.x = f`).

Language dunders (`__name__`, `__version__`, `__class__`, `__code__` ...) are public. The project's
own private names are test_imports.py's rule. What the scan cannot avoid flagging but a library
documents as its API despite the underscore is in ALLOWED, with the files that may use it and why.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("bench", "reports", "fsdp_core", "sweeps")
SCANNED = (*PROJECT, "scripts", "benchmarks")  # the packages and the scripts and benchmarks that use them
PRIVATE_DUNDER = re.compile(r"__dict__|__pydantic_\w*")
# collections.namedtuple's documented methods and attributes (psutil's results are namedtuples): the
# underscore only keeps them apart from field names.
NAMEDTUPLE_API = frozenset({"_asdict", "_replace", "_make", "_fields", "_field_defaults"})

# The one allow-list: private-looking names a library documents as its API and that have no public
# equivalent. Dotted name (as the scan reports it) -> (the files that may use it, why).
ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    "os._exit": (
        ("fsdp_core/lifeline.py", "fsdp_core/worker.py", "fsdp_core/flight_recorder.py"),
        "the os module's documented exit without cleanup: a rank whose launcher is gone, or whose "
        "process group has a dead peer, must stop without running teardown that could hang",
    ),
    "torch.utils._python_dispatch.TorchDispatchMode": (
        ("fsdp_core/comm_counter.py",),
        "the dispatch-mode base class, documented where PyTorch documents modes (its example in "
        "torch.library.register_torch_dispatch subclasses it from here); there is no public alias, and "
        "the public CommDebugMode counts collective calls, not the bytes they move",
    ),
    "torch._dynamo.lookup_backend": (
        ("fsdp_core/compile_stats.py",),
        "documented in PyTorch's Custom Backends guide (Composable Backends) as how a backend of one's "
        "own hands a graph to a registered backend; torch.compiler has no public equivalent",
    ),
    "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.checkpoint_wrapper": (
        ("fsdp_core/parallelize.py",),
        "PyTorch's FSDP tutorial (Advanced Model Training with FSDP) wraps blocks with it from here, as "
        "torchtitan does; torch.utils.checkpoint has no module wrapper, and this one's parameter-name "
        "prefix and state_dict hooks are what the model's parameter names and the checkpoints' keys assume",
    ),
    "torch._C._distributed_c10d._dump_fr_trace_json": (
        ("fsdp_core/flight_recorder.py",),
        "the Flight Recorder's JSON dump, the call PyTorch's Flight Recorder tutorial (Flight Recorder for "
        "Debugging Stuck Jobs) documents for dumping a rank's collectives; torch has no public alias. "
        "Looked up tolerantly: a torch without it leaves a dump that says so, never a failed import",
    ),
    "torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker": (
        ("fsdp_core/memory_categories.py",),
        "FSDP2's memory tracker, documented in PyTorch's FSDP2 memory-tracking docs (torch.distributed._tools); "
        "the only tool that splits a step's memory into FSDP's categories at the peak. Imported tolerantly: a "
        "torch without it leaves metrics.peak_mem_by_category null with the reason in the record's notes",
    ),
    **{
        f"torch.cuda.memory.{name}": (
            ("fsdp_core/memory_history.py",),
            "the CUDA caching allocator's memory history and its snapshot, the calls PyTorch's 'Understanding "
            "CUDA Memory Usage' documents (the snapshot opens at pytorch.org/memory_viz); no public alias. Looked "
            "up tolerantly: a torch without them leaves a record note",
        )
        for name in ("_record_memory_history", "_snapshot")
    },
    "torch.distributed.distributed_c10d._world.pg_names": (
        ("fsdp_core/flight_recorder.py",),
        "every process group a rank knows, by name: gloo's Flight Recorder leaves pg_config empty, and "
        "torch.distributed has no public list of groups (get_process_group_ranks, public, gives each one's "
        "ranks). Looked up tolerantly: without it the dump holds no groups and the verdict uses the world",
    ),
    **{
        f"torch.distributed.fsdp._fully_shard._fsdp_collectives.{name}": (
            ("fsdp_core/debug_knobs.py",),
            "FSDP2's custom-collective hooks (FSDPModule.set_custom_all_gather / set_custom_reduce_scatter, "
            "public) take an AllGather / ReduceScatter; FSDP checks a custom one with isinstance against its "
            "defaults, so debug.comm_delay_ms delays the default by subclassing it, and torch exports no public "
            "alias of either. Imported tolerantly: a torch without them refuses the knob in one line",
        )
        for name in ("DefaultAllGather", "DefaultReduceScatter")
    },
}


def is_private(name: str) -> bool:
    """`_x` and `__x` are private; `__x__` dunders are the language's, except the storage ones."""
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        return bool(PRIVATE_DUNDER.fullmatch(name))
    return name.startswith("_") and name not in NAMEDTUPLE_API


def is_project(dotted: str) -> bool:
    return dotted.split(".")[0] in PROJECT


def chain(node: ast.expr) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None when the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name an import bound it to (any scope; a relative import: the project),
    plus names assigned a plain attribute chain of one of them (`c10d = dist.distributed_c10d`)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            module = node.module if node.level == 0 and node.module else PROJECT[0]
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            parts = chain(node.value)
            if parts and parts[0] in bound and node.targets[0].id not in bound:
                bound[node.targets[0].id] = ".".join([bound[parts[0]], *parts[1:]])
    return bound


def project_defined(trees: list[ast.Module]) -> set[str]:
    """The `_`-prefixed names the project defines: functions, classes, variables, keyword arguments,
    and attributes it assigns on `self` or `cls`."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)  # fields given by keyword (dataclasses, pydantic's private attributes)
    return {name for name in names if is_private(name)}


def imported_module_string(node: ast.Call) -> str | None:
    """The literal module name of `importlib.import_module("x")` or `__import__("x")`."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def private_access(tree: ast.Module, defined: set[str]) -> list[str]:
    """Every private name of another package that `tree` imports, reads or sets, in source order, as
    `kind: dotted.name` (resolved through the file's imports where it can be)."""
    bound = imported_names(tree)
    found: list[tuple[int, int, str]] = []

    def flag(node: ast.AST, text: str) -> None:
        found.append((node.lineno, node.col_offset, text))

    def resolve(parts: list[str]) -> list[str]:
        return [*bound[parts[0]].split("."), *parts[1:]] if parts[0] in bound else parts

    def foreign(parts: list[str] | None) -> bool:
        return parts is not None and parts[0] in bound and not is_project(bound[parts[0]])

    def private_module(dotted: str) -> bool:
        return not is_project(dotted) and any(map(is_private, dotted.split(".")))

    chain_tops = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if private_module(alias.name):
                    flag(node, f"import: {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and not is_project(node.module):
            for alias in node.names:
                if private_module(f"{node.module}.{alias.name}"):
                    flag(node, f"import: {node.module}.{alias.name}")
        elif isinstance(node, ast.Call) and (module := imported_module_string(node)):
            if private_module(module):
                flag(node, f"import: {module}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            function, parts = node.func.id, chain(node.args[0])
            name = node.args[1] if len(node.args) > 1 else None
            if function in ("setattr", "delattr") and foreign(parts):
                flag(node, f"setattr: {'.'.join(resolve(parts))}")
            elif function in ("getattr", "hasattr") and isinstance(name, ast.Constant):
                attribute = name.value
                if isinstance(attribute, str) and is_private(attribute):
                    if PRIVATE_DUNDER.fullmatch(attribute) or foreign(parts) or attribute not in defined:
                        flag(node, f"attribute: {'.'.join(resolve(parts)) if parts else '?'}.{attribute}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for element in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                    if isinstance(element, ast.Attribute) and foreign(parts := chain(element.value)):
                        flag(element, f"setattr: {'.'.join(resolve([*parts, element.attr]))}")
        if not isinstance(node, ast.Attribute) or id(node) in chain_tops:
            continue
        parts = chain(node)
        if foreign(parts):  # rooted at another package's import: the whole chain, resolved
            if any(map(is_private, parts[1:])):
                flag(node, f"attribute: {'.'.join(resolve(parts))}")
            continue
        link: ast.expr = node  # any other object: each private link of the chain on its own
        while isinstance(link, ast.Attribute):
            value = chain(link.value)
            ours = value is not None and len(value) == 1 and is_project(bound.get(value[0], "?"))
            if is_private(link.attr) and not ours:
                if PRIVATE_DUNDER.fullmatch(link.attr) or link.attr not in defined:
                    flag(link, f"attribute: {'.'.join(value) if value else '?'}.{link.attr}")
            link = link.value
    return [text for _, _, text in sorted(found)]


@functools.cache
def scanned_trees() -> dict[str, ast.Module]:
    """Relative path -> parsed module, for every file the rule applies to."""
    paths = sorted(path for tree in SCANNED for path in (ROOT / tree).rglob("*.py"))
    return {str(path.relative_to(ROOT)): ast.parse(path.read_text(), str(path)) for path in paths}


@functools.cache
def uses() -> dict[str, list[str]]:
    """File -> every use of another package's private names the scan finds in it (allowed or not)."""
    trees = scanned_trees()
    defined = project_defined(list(trees.values()))
    return {relative: found for relative, tree in trees.items() if (found := private_access(tree, defined))}


def allowed(use: str, relative: str) -> bool:
    return relative in ALLOWED.get(use.split(": ", 1)[1], ((), ""))[0]


def test_no_module_uses_another_packages_private_names():
    offenders = {
        relative: names
        for relative, found in uses().items()
        if (names := [use for use in found if not allowed(use, relative)])
    }
    assert offenders == {}


def test_every_allowed_name_has_its_reason_and_is_still_used_where_it_is_allowed():
    """An entry whose use went away goes too, so the list only ever names what the code needs."""
    used = {(use.split(": ", 1)[1], relative) for relative, found in uses().items() for use in found}
    for name, (allowed_in, reason) in ALLOWED.items():
        assert reason and allowed_in, name
        for relative in allowed_in:
            assert (name, relative) in used, f"{name} is no longer used in {relative}: drop it from ALLOWED"


def scan(code: str, defined: frozenset = frozenset({"_ours", "_count"})) -> list[str]:
    return private_access(ast.parse(textwrap.dedent(code)), set(defined))


def test_the_scan_flags_private_imports_of_other_packages():
    assert scan("""
        import torch._dynamo
        import torch._C as C
        from hydra._internal.utils import create_config_search_path
        from numpy import _core
        from torch.utils._python_dispatch import TorchDispatchMode
        import importlib
        importlib.import_module("numpy._core.multiarray")
        __import__("matplotlib._pylab_helpers")
    """) == [
        "import: torch._dynamo",
        "import: torch._C",
        "import: hydra._internal.utils.create_config_search_path",
        "import: numpy._core",
        "import: torch.utils._python_dispatch.TorchDispatchMode",
        "import: numpy._core.multiarray",
        "import: matplotlib._pylab_helpers",
    ]


def test_the_scan_flags_private_attributes_of_other_packages():
    assert scan("""
        import torch
        import torch.distributed as dist
        import numpy as np
        from matplotlib import text
        c10d = dist.distributed_c10d
        torch._C._distributed_c10d.ProcessGroup
        dist.distributed_c10d._set_pg_timeout(1)
        c10d._world
        np._core.multiarray
        text._x
        def f(ax, model, scaler):
            ax._request_autoscale_view()
            scaler._get_scale_async()
            model.__dict__
            type(model).__pydantic_decorators__
            getattr(ax, "_children")
            hasattr(torch, "_scaled_mm")
            model.layer._orig_mod.forward
            vars(model).__dict__
    """) == [
        "attribute: torch._C._distributed_c10d.ProcessGroup",
        "attribute: torch.distributed.distributed_c10d._set_pg_timeout",
        "attribute: torch.distributed.distributed_c10d._world",
        "attribute: numpy._core.multiarray",
        "attribute: matplotlib.text._x",
        "attribute: ax._request_autoscale_view",
        "attribute: scaler._get_scale_async",
        "attribute: model.__dict__",
        "attribute: ?.__pydantic_decorators__",
        "attribute: ax._children",
        "attribute: torch._scaled_mm",
        "attribute: model.layer._orig_mod",
        "attribute: ?.__dict__",
    ]


def test_the_scan_flags_setattr_on_other_packages_modules_and_classes():
    assert scan("""
        import matplotlib.font_manager as font_manager
        from matplotlib.text import Text
        setattr(Text, "draw", print)
        font_manager.get_font = print
        Text.draw, x = print, 1
        del font_manager.fontManager
        delattr(Text, "draw")
        font_manager.fontManager.ttflist += []
    """) == [
        "setattr: matplotlib.text.Text",
        "setattr: matplotlib.font_manager.get_font",
        "setattr: matplotlib.text.Text.draw",
        "setattr: matplotlib.font_manager.fontManager",
        "setattr: matplotlib.text.Text",
        "setattr: matplotlib.font_manager.fontManager.ttflist",
    ]


def test_the_scan_leaves_public_names_dunders_and_the_projects_own_alone():
    assert (
        scan("""
        from __future__ import annotations
        import os, psutil, torch, matplotlib
        from bench.config import compose
        from . import sibling
        print(torch.__version__, matplotlib.__file__, type(os).__name__, os.__class__.__qualname__)
        print(torch.cuda.memory.max_memory_allocated, f.__code__, f.__module__, f.__doc__)
        print(psutil.cpu_times()._asdict(), point._replace(x=1), point._fields)
        compose.thing._ours
        sibling._ours
        class A:
            def __init__(self):
                self._ours = 1
                self._count += 1
            def copy(self, other):
                return other._ours, getattr(self, "_count")
        setattr(A, "x", 1)
        compose.value = 2
        obj = A()
        obj.x = 3
        setattr(obj, "_ours", 4)
        torch.manual_seed(0)
    """)
        == []
    )


def test_what_the_project_defines_is_its_own():
    tree = ast.parse(
        textwrap.dedent("""
        _TABLE = {}
        def _helper(): ...
        class _Box:
            _slot: int = 0
            def __init__(self):
                self._state = 1
        make(_field=1)
        torch.thing._not_ours = 2
    """)
    )
    assert project_defined([tree]) == {"_TABLE", "_helper", "_Box", "_slot", "_state", "_field"}
