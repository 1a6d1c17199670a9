"""What torch.compile did for one point: graphs compiled, cache entries, graph breaks.

Recorded so that a compiled point can be told apart from the same point compiled under other
conditions: run alone, every compiled block's forward holds exactly one dynamo cache entry (a
static-shape graph); a second entry means dynamo recompiled it, typically with dynamic shapes
because an earlier point of the same process left its graph behind (the worker resets dynamo
after every point to prevent exactly that).

torch has no public counters of its compilations, so the blocks are compiled through a backend of
our own, `CountingBackend`, that counts the graphs dynamo hands it and passes each on to the backend
the point names (looked up as PyTorch's Custom Backends guide shows). Blocks are compiled with
fullgraph=True (fsdp_core/parallelize.py), so each compilation of a block's forward is one graph
and one cache entry on that forward's code, and a graph break fails the compile instead of
splitting the graph: an `ok` point met none. The counts are this process's since the last reset
(`reset_compiler`), as dynamo's cache entries are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import CodeType

import torch
from torch import nn

from bench.schema.record import CompileInfo

# Compilations per compiled forward (its code object) since the last reset_compiler(), in this process.
_COMPILED: Counter[CodeType] = Counter()
# One backend per (forward code, backend name) in this process: blocks that share their forward share
# one backend, so dynamo's cache entries are shared between them as with a backend named by a string.
_BACKENDS: dict[tuple[CodeType, str], CountingBackend] = {}


class CountingBackend:
    """A torch.compile backend that counts the graphs of one forward, then compiles them with `name`."""

    def __init__(self, code: CodeType, name: str) -> None:
        from torch._dynamo import lookup_backend  # on the allow-list: the documented way to compose backends

        self.code, self.compile = code, lookup_backend(name)

    def __call__(self, graph: torch.fx.GraphModule, example_inputs: list) -> Callable:
        _COMPILED[self.code] += 1
        return self.compile(graph, example_inputs)


def counting_backend(module: nn.Module, name: str) -> CountingBackend:
    """The backend to torch.compile `module` with: backend `name`, its graphs counted per forward."""
    code = type(module).forward.__code__
    if (code, name) not in _BACKENDS:
        _BACKENDS[code, name] = CountingBackend(code, name)
    return _BACKENDS[code, name]


def reset_compiler() -> None:
    """torch.compiler.reset(): dynamo forgets every compiled graph and cache entry, and so do the counts."""
    torch.compiler.reset()
    _COMPILED.clear()


class CompileStats:
    """The compilations at a point's start; `summary` gives the point's share."""

    def __init__(self) -> None:
        self._graphs = sum(_COMPILED.values())

    def close(self) -> None:
        """The point is over: the next one compiles as if it ran alone (`reset_compiler`)."""
        reset_compiler()

    def summary(self) -> CompileInfo:
        """graphs: graphs compiled during the point (forward graphs; autograd adds their backward);
        cache_entries: the most entries any compiled forward holds now; graph_breaks: none under
        fullgraph=True (a break fails the compile)."""
        return CompileInfo(
            graphs=sum(_COMPILED.values()) - self._graphs,
            cache_entries=max(_COMPILED.values(), default=0),
            graph_breaks=0,
        )
