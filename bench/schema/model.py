"""A Llama-architecture model's dimensions (one type: the spec's model, the engine's arguments, the
record's model_info and the planner's shapes are views of it)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from bench.schema.base import Strict
from bench.schema.identity import DESCRIBES, IN
from bench.schema.model_args import ModelArgs


class ModelSpec(Strict):
    """A Llama-architecture model, fully resolved (sweeps/model/<name>.yaml, with any overrides).

    A point's identity holds its name and shape; its sequence limits and source only describe it."""

    name: Annotated[str, IN]
    dim: Annotated[int, IN] = Field(ge=1, strict=True)
    n_layers: Annotated[int, IN] = Field(ge=1, strict=True)
    n_heads: Annotated[int, IN] = Field(ge=1, strict=True)
    n_kv_heads: Annotated[int, IN] = Field(ge=1, strict=True)
    ffn_dim: Annotated[int, IN] = Field(ge=1, strict=True)
    vocab_size: Annotated[int, IN] = Field(ge=1, strict=True)
    max_seq_len: Annotated[int, DESCRIBES] = Field(ge=1, strict=True)
    default_seq_len: Annotated[int | None, DESCRIBES] = Field(None, ge=1, strict=True, description="null: max_seq_len")
    norm_eps: Annotated[float, IN] = Field(1e-5, gt=0, description="RMSNorm epsilon (Llama-2: 1e-5)")
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

    def args(self) -> ModelArgs:
        """The engine's (torch-free) model arguments."""
        return ModelArgs(**self.model_dump(exclude={"overrides"}))


class ModelInfo(Strict):
    params: int
    non_embedding_params: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
