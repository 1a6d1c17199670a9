"""A legend's boxes packed once per draw, not once per level of its tree: the same legend, the same pixels.

A matplotlib legend is a tree of packers (`VPacker`, `HPacker` of `matplotlib.offsetbox`): the legend box holds
the columns, a column the entries, an entry its handle and its text. A packer's size and its
children's offsets (`_get_bbox_and_child_offsets`) are computed from its children's sizes, every time
anything asks: for the legend's frame (`get_window_extent`), again to draw the legend box, and again as
each packer below draws, so an entry is measured once per level above it. The report's figures' 25
legends packed their boxes about 1,100 times. While a legend draws, nothing changes its boxes' sizes
(drawing only places them), so here each packer's result is computed once per legend draw and kept
until the draw ends: the same packing, in a fraction of the time (tests/unit/test_legend_packing.py
draws the report's figures both ways and compares the PNG bytes).

Only while a `Legend` draws; other packers (anchored boxes, annotations) are packed as matplotlib packs
them. `install()` replaces `Legend.draw` and the packers' `_get_bbox_and_child_offsets` in matplotlib
3.10 (bench/present/matplotlib_patches.py), whose legends this module was written against, and leaves
any other version as it is. Installed by the report's figure workers
(bench/present/report/render.py).
"""

from __future__ import annotations

import functools

from matplotlib.legend import Legend
from matplotlib.offsetbox import HPacker, PackerBase, VPacker

from bench.present.matplotlib_patches import replace

# matplotlib's own, which install() replaces.
matplotlibs_draw = Legend.draw
matplotlibs_packing = {packer: packer._get_bbox_and_child_offsets for packer in (VPacker, HPacker)}
# While a legend draws: (packer id, renderer id) -> (packing, packer, renderer); the packer and the
# renderer are held so that their ids stay theirs until the draw ends. None: no legend draws.
_packed: dict[tuple[int, int], tuple] | None = None


def install() -> bool:
    """Pack each legend's boxes once per draw in this process from now on; False where matplotlib is not
    the version known here (nothing is changed then). Installing twice is installing once."""
    packers = [(packer, "_get_bbox_and_child_offsets", packed) for packer, packed in _PACKED_ONCE.items()]
    return replace([*packers, (Legend, "draw", packed_draw)])


@functools.wraps(matplotlibs_draw)
def packed_draw(self: Legend, renderer) -> None:
    """Legend.draw, each of its packers packed once."""
    global _packed
    if _packed is not None:  # a legend in a legend's draw: the outer one's packings serve
        return matplotlibs_draw(self, renderer)
    _packed = {}
    try:
        return matplotlibs_draw(self, renderer)
    finally:
        _packed = None


def _packed_once(packer: type[PackerBase]):
    """`packer`'s `_get_bbox_and_child_offsets`, computed once while a legend draws."""

    @functools.wraps(matplotlibs_packing[packer])
    def packed(self: PackerBase, renderer):
        if _packed is None:
            return matplotlibs_packing[packer](self, renderer)
        key = (id(self), id(renderer))
        kept = _packed.get(key)
        if kept is None:
            kept = _packed[key] = (matplotlibs_packing[packer](self, renderer), self, renderer)
        return kept[0]

    return packed


# Each packer's memoized packing, made once (install compares what is in place with these).
_PACKED_ONCE = {packer: _packed_once(packer) for packer in matplotlibs_packing}
