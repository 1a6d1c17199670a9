"""Model shapes the planner reasons about: the engine's Llama flavors plus calibration-only MPT shapes.

The planner needs more than a parameter count: the shape of every parameter (FSDP2 pads
each one on dim 0 to a multiple of the shard count, and the counted communication bytes
include that padding), which parameters live in the root module, and the tensor widths
that set activation memory. `ModelShape` carries these for both families and exposes the
attributes `bench.schema.flops` reads (`non_embedding_params`, `block_params`, `n_layers`,
`dim`, `ffn_dim`, `block_matmuls`), so the one FLOPs formula serves both.

MPT shapes exist only to compare with the published llm-foundry figures
(bench/analysis/planner/data/published_calibration.csv); `fsdp-bench run` cannot train them.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

from bench.schema.model import DIMENSION_FIELDS, ModelDimensions, ModelInfo, ModelSpec


@dataclass(frozen=True)
class ModelShape:
    """Per-parameter shapes of one decoder-only model, split into the blocks and the root."""

    name: str
    # The model's dimensions, the one type the spec and the record use too; read as shape.dim etc.
    dims: ModelDimensions
    # (dim0, numel) of each parameter of one transformer block and of the root module.
    block_shapes: tuple[tuple[int, int], ...]
    root_shapes: tuple[tuple[int, int], ...]
    # Parameters of the root that are input lookups (no matmul): left out of 6*N.
    lookup_params: int
    # SwiGLU (three MLP matrices, two saved ffn-wide tensors more) or GELU MLP.
    gated_mlp: bool = True
    # The engine's Llama code (fsdp_core/model.py): its saved tensors are counted exactly
    # (bench/analysis/planner/activations.py); False: a generic count (MPT).
    engine_layout: bool = True
    # (out_features, in_features) of one block's matmuls in forward order (selective_op saves by position).
    block_matmuls: tuple[tuple[int, int], ...] = ()

    def __hash__(self) -> int:
        # Hashed once: shapes key the planner's caches, and their nested tuples are long.
        return self._hash

    @cached_property
    def _hash(self) -> int:
        # The dimensions by their tuple: a pydantic model is not hashable.
        return hash(tuple(self.dims.dimensions if f.name == "dims" else getattr(self, f.name) for f in fields(self)))

    @cached_property
    def block_params(self) -> int:
        return sum(numel for _, numel in self.block_shapes)

    @cached_property
    def root_params(self) -> int:
        return sum(numel for _, numel in self.root_shapes)

    @cached_property
    def params(self) -> int:
        return self.n_layers * self.block_params + self.root_params

    @cached_property
    def non_embedding_params(self) -> int:
        return self.params - self.lookup_params

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.dims.head_dim

    def info(self) -> ModelInfo:
        """The record's `model_info` (for a Llama shape, what its ModelSpec.info() says): a copy of the
        one this shape keeps (every point of a grid's model asks for it)."""
        return self._info.model_copy()

    @cached_property
    def _info(self) -> ModelInfo:
        return ModelInfo.of(self)

    def info_dict(self) -> dict[str, int]:
        """`info().model_dump()`, a fresh dict per call (its values are ints: a shallow copy of the
        one dump this shape keeps is the whole dump), for a plan's thousands of `model_info`s."""
        return dict(self._info_dump)

    @cached_property
    def _info_dump(self) -> dict[str, int]:
        return self._info.model_dump()


# shape.dim, shape.n_layers, ...: the dimensions read through, so `bench.schema.flops` and ModelInfo.of
# see the attributes a ModelSpec has.
for _name in DIMENSION_FIELDS:
    setattr(ModelShape, _name, property(operator.attrgetter(f"dims.{_name}")))


# Llama shapes by (name, dimensions): a grid asks for the same few models thousands of times. Keyed on
# the dimensions, not on the ModelSpec: a pydantic model is not hashable, and its `overrides` never is.
_LLAMA_SHAPES: dict[tuple, ModelShape] = {}


def llama_shape(model: ModelSpec) -> ModelShape:
    """The engine's Llama model (fsdp_core/model.py), parameter by parameter (cached per dimensions)."""
    key = (model.name, model.dimensions)
    if key not in _LLAMA_SHAPES:
        _LLAMA_SHAPES[key] = _build_llama_shape(model)
    return _LLAMA_SHAPES[key]


def _build_llama_shape(model: ModelSpec) -> ModelShape:
    d, hd, f, v = model.dim, model.head_dim, model.ffn_dim, model.vocab_size
    q, kv = model.n_heads * hd, model.n_kv_heads * hd
    block = (
        (q, q * d),
        (kv, kv * d),
        (kv, kv * d),
        (d, d * q),  # wq, wk, wv, wo
        (f, f * d),
        (d, d * f),
        (f, f * d),  # w1, w2, w3
        (d, d),
        (d, d),
    )  # attention_norm, ffn_norm
    root = ((v, v * d), (d, d), (v, v * d))  # tok_embeddings, norm, output
    return ModelShape(
        name=model.name,
        dims=model.dimensions_only(),
        block_shapes=block,
        root_shapes=root,
        lookup_params=v * d,
        block_matmuls=model.block_matmuls,
    )


# llm-foundry's MPT: dense GPT blocks (fused Wqkv 3d^2, out-proj d^2, MLP 4d^2 + 4d^2 with
# expansion ratio 4), biases and LayerNorm biases (the benchmark runs keep no_bias=False),
# tied input/output embeddings over vocab 50368, and a learned position table of seq_len rows.
# Dimensions: llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml. With these the parameter
# count equals the NumParams column of llm-foundry's benchmark table (6,658,859,008 for 7B at
# seq 2048), so the FLOPs formula reproduces its MFU column.
MPT_DIMS: dict[str, tuple[int, int, int]] = {  # name -> (d_model, n_layers, n_heads)
    "mpt-7b": (4096, 32, 32),
    "mpt-13b": (5120, 40, 40),
    "mpt-30b": (7168, 48, 56),
    "mpt-70b": (8192, 80, 64),
}
MPT_VOCAB = 50368


def mpt_shape(name: str, seq_len: int) -> ModelShape:
    """A calibration-only MPT shape (see MPT_DIMS); the position table has seq_len rows."""
    if name not in MPT_DIMS:
        raise ValueError(f"unknown calibration model '{name}'; allowed: {', '.join(MPT_DIMS)}")
    d, layers, heads = MPT_DIMS[name]
    f = 4 * d
    block = (
        (3 * d, 3 * d * d),
        (3 * d, 3 * d),
        (d, d * d),
        (d, d),  # Wqkv (+bias), out_proj (+bias)
        (f, f * d),
        (f, f),
        (d, d * f),
        (d, d),  # up_proj (+bias), down_proj (+bias)
        (d, d),
        (d, d),
        (d, d),
        (d, d),
    )  # norm_1, norm_2 weight and bias
    # The tied embedding is one matrix used as the output projection (a matmul on every token),
    # so it stays in 6*N, as llm-foundry counts it; the position table is a lookup.
    root = ((MPT_VOCAB, MPT_VOCAB * d), (seq_len, seq_len * d), (d, d), (d, d))
    return ModelShape(
        name=name,
        dims=ModelDimensions(dim=d, n_layers=layers, n_heads=heads, n_kv_heads=heads, ffn_dim=f, vocab_size=MPT_VOCAB),
        block_shapes=block,
        root_shapes=root,
        lookup_params=seq_len * d,
        gated_mlp=False,
        engine_layout=False,
        block_matmuls=((3 * d, d), (d, d), (f, d), (d, f)),  # Wqkv, out_proj, up_proj, down_proj
    )


@lru_cache(maxsize=4096)
def padded_numel(shapes: tuple[tuple[int, int], ...], shards: int) -> int:
    """Unsharded element count after FSDP2 pads each parameter's dim 0 to a multiple of `shards`
    (cached: a grid asks the same few shapes and shard counts thousands of times)."""
    total = 0
    for dim0, numel in shapes:
        total += math.ceil(dim0 / shards) * shards * (numel // dim0)
    return total
