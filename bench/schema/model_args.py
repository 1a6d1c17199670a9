"""The model's hyper-parameters as the engine receives them, and the numbers derived from them.

Importable without torch: the planner and the CLI use these numbers before any process starts.
The named sizes (flavors) live in sweeps/model/*.yaml, validated by bench.schema.model.ModelSpec
before they reach here; this is a plain carrier with the closed forms of the parameter counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelArgs:
    """Llama-architecture hyper-parameters. Derived fields are filled in __post_init__."""

    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    max_seq_len: int
    default_seq_len: int
    # 1e-5 is Meta's Llama-2 RMSNorm epsilon (params.json "norm_eps").
    norm_eps: float = 1e-5
    # 10000 is the RoPE base of Llama-2; Llama-3 raised it to 500000 for long context.
    rope_theta: float = 10000.0
    head_dim: int = field(init=False)
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_dim", self.dim // self.n_heads)

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

    def info(self) -> dict[str, int]:
        """The `model_info` block of a result record."""
        return {
            "params": self.params,
            "non_embedding_params": self.non_embedding_params,
            "dim": self.dim,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "ffn_dim": self.ffn_dim,
            "vocab_size": self.vocab_size,
        }
