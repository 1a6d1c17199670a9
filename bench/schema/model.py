"""A Llama-architecture model's dimensions: one type for the spec's model, the engine's arguments
(fsdp_core/model.py builds from it), the FLOPs formula (bench/schema/flops.py), the planner's shapes
(bench/analysis/planner/shapes.py) and the record's `model_info` (`ModelSpec.info()`).

Torch-free: the planner and the CLI use these numbers before any process starts. The named sizes
(flavors) live in sweeps/model/*.yaml and are validated here.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from bench.schema.base import Strict
from bench.schema.identity import DESCRIBES, IN


class ModelDimensions(Strict):
    """The six numbers a Llama-shaped (decoder-only) model's tensors follow: declared once here. The
    spec's model (ModelSpec), the record's `model_info` (ModelInfo) and the planner's shapes
    (bench/analysis/planner/shapes.py `ModelShape.dims`) are this type with more around it."""

    dim: Annotated[int, IN] = Field(ge=1, strict=True)
    n_layers: Annotated[int, IN] = Field(ge=1, strict=True)
    n_heads: Annotated[int, IN] = Field(ge=1, strict=True)
    n_kv_heads: Annotated[int, IN] = Field(ge=1, strict=True)
    ffn_dim: Annotated[int, IN] = Field(ge=1, strict=True)
    vocab_size: Annotated[int, IN] = Field(ge=1, strict=True)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def dimensions(self) -> tuple[int, ...]:
        """What the model's shapes depend on (dim, n_layers, n_heads, n_kv_heads, ffn_dim, vocab_size):
        a hashable key for caches (a pydantic model is not hashable, and a spec's `overrides` never is)."""
        return (self.dim, self.n_layers, self.n_heads, self.n_kv_heads, self.ffn_dim, self.vocab_size)

    def dimensions_only(self) -> ModelDimensions:
        """These six numbers alone (a ModelSpec's or a ModelInfo's)."""
        return ModelDimensions.model_construct(**{name: getattr(self, name) for name in DIMENSION_FIELDS})


class ModelSpec(ModelDimensions):
    """A Llama-architecture model, fully resolved (sweeps/model/<name>.yaml, with any overrides).

    A point's identity holds its name and shape; its sequence limits and source only describe it.
    The derived numbers are properties, never fields: they are not stored in a record's spec (whose
    shape stays as it was) and always follow the dimensions, also on a `model_copy(update=...)`."""

    name: Annotated[str, IN]
    max_seq_len: Annotated[int, DESCRIBES] = Field(ge=1, strict=True)
    default_seq_len: Annotated[int | None, DESCRIBES] = Field(None, ge=1, strict=True, description="null: max_seq_len")
    # 1e-5 is Meta's Llama-2 RMSNorm epsilon (params.json "norm_eps").
    norm_eps: Annotated[float, IN] = Field(1e-5, gt=0, description="RMSNorm epsilon (Llama-2: 1e-5)")
    # 10000 is the RoPE base of Llama-2; Llama-3 raised it to 500000 for long context.
    rope_theta: Annotated[float, IN] = Field(10000.0, gt=0, description="RoPE base (Llama-2: 10000, Llama-3: 500000)")
    source: Annotated[str, DESCRIBES] = Field("", description="where the numbers come from")
    overrides: Annotated[dict[str, Any], DESCRIBES] = Field(
        default_factory=dict, description="fields set away from the named preset when composed (labels only)"
    )

    @model_validator(mode="after")
    def _shape(self) -> ModelSpec:
        if self.dim % self.n_heads:
            raise ValueError(f"dim={self.dim} must be divisible by n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be divisible by n_kv_heads={self.n_kv_heads}")
        if self.default_seq_len is None:
            self.default_seq_len = self.max_seq_len
        return self

    # Parameter counts in closed form: they must agree with the meta-device count (a unit test checks).
    @property
    def block_params(self) -> int:
        kv_dim = self.n_kv_heads * self.head_dim
        attention = self.dim * self.dim * 2 + self.dim * kv_dim * 2  # wq, wo, wk, wv
        mlp = 3 * self.dim * self.ffn_dim  # w1 (gate), w2 (down), w3 (up)
        norms = 2 * self.dim
        return attention + mlp + norms

    @property
    def block_matmuls(self) -> tuple[tuple[int, int], ...]:
        """(out_features, in_features) of one block's matmuls in the order its forward runs them
        (fsdp_core/model.py): wq, wk, wv, wo, then w1 (gate), w3 (up), w2 (down). selective_op saves
        or recomputes them by position (bench/schema/ac_modes.py); a unit test checks the order."""
        d, q, kv, f = self.dim, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim, self.ffn_dim
        return ((q, d), (kv, d), (kv, d), (d, q), (f, d), (f, d), (d, f))

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.dim

    @property
    def params(self) -> int:
        # Llama does not tie input and output embeddings: both count.
        return 2 * self.embedding_params + self.n_layers * self.block_params + self.dim

    @property
    def non_embedding_params(self) -> int:
        """Parameters excluding the input embedding (torchtitan's convention for FLOPs per token).

        The output projection stays in: it is a matmul on every token, unlike the embedding lookup.
        """
        return self.params - self.embedding_params

    def info(self) -> ModelInfo:
        """The record's `model_info`."""
        return ModelInfo.of(self)


class ModelInfo(ModelDimensions):
    """A record's `model_info`: the trained model's dimensions and size (ModelSpec.info(), or the
    planner's ModelShape.info() for shapes the engine cannot train)."""

    params: int
    non_embedding_params: int

    @classmethod
    def of(cls, model: Any) -> ModelInfo:
        """The model_info of a model with these attributes (a ModelSpec, or the planner's ModelShape)."""
        return cls(**{name: getattr(model, name) for name in cls.model_fields})


DIMENSION_FIELDS: tuple[str, ...] = tuple(ModelDimensions.model_fields)
