"""What torch.compile did for one point: graphs compiled, cache entries, graph breaks.

Recorded so that a compiled point can be told apart from the same point compiled under other
conditions: run alone, every compiled block's forward holds exactly one dynamo cache entry (a
static-shape graph); a second entry means dynamo recompiled it, typically with dynamic shapes
because an earlier point of the same process left its graph behind (the worker resets dynamo
after every point to prevent exactly that).
"""

from __future__ import annotations

from torch import nn
from torch._dynamo.eval_frame import OptimizedModule, _debug_get_cache_entry_list
from torch._dynamo.utils import counters

from bench.schema.record import CompileInfo


class CompileStats:
    """Snapshot dynamo's process-wide counters at a point's start; `summary` gives the point's share."""

    def __init__(self) -> None:
        self._graphs = counters["stats"]["unique_graphs"]
        self._breaks = sum(counters["graph_break"].values())

    def summary(self, model: nn.Module) -> CompileInfo:
        """graphs: dynamo graphs compiled during the point (forward graphs; autograd adds their
        backward); cache_entries: the most entries any compiled module's forward holds now;
        graph_breaks: breaks met while tracing (0 under fullgraph=True)."""
        return CompileInfo(
            graphs=counters["stats"]["unique_graphs"] - self._graphs,
            cache_entries=max((len(_debug_get_cache_entry_list(code)) for code in compiled_codes(model)), default=0),
            graph_breaks=sum(counters["graph_break"].values()) - self._breaks,
        )


def compiled_codes(model: nn.Module) -> set:
    """The code objects dynamo compiled for each torch.compile-d submodule (its forward)."""
    return {type(m._orig_mod).forward.__code__ for m in model.modules() if isinstance(m, OptimizedModule)}
