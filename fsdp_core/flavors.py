"""Named model sizes (flavors) as plain dataclasses.

Importable without torch: the planner, the config validator and the CLI use these
numbers before any process starts.
"""

from __future__ import annotations

import dataclasses
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
        for name in (
            "dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "ffn_dim",
            "vocab_size",
            "max_seq_len",
            "default_seq_len",
            "norm_eps",
            "rope_theta",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"model.{name} must be a positive number, got {value!r}")
        if self.dim % self.n_heads:
            raise ValueError(f"model.dim={self.dim} must be divisible by model.n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"model.n_heads={self.n_heads} must be divisible by model.n_kv_heads={self.n_kv_heads}")
        object.__setattr__(self, "head_dim", self.dim // self.n_heads)

    def with_overrides(self, **overrides: object) -> ModelArgs:
        """Return a copy with some fields replaced (for `model.n_layers=2` style overrides)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        unknown = set(overrides) - set(fields)
        if unknown:
            raise ValueError(f"unknown model field(s) {sorted(unknown)}; allowed: {sorted(fields)}")
        fields.update(overrides)
        return ModelArgs(**fields)

    # Parameter counts in closed form: they must agree with the meta-device count (a unit test checks).
    @property
    def block_params(self) -> int:
        kv_dim = self.n_kv_heads * self.head_dim
        attention = self.dim * self.dim * 2 + self.dim * kv_dim * 2  # wq, wo, wk, wv
        mlp = 3 * self.dim * self.ffn_dim  # w1 (gate), w2 (down), w3 (up)
        norms = 2 * self.dim
        return attention + mlp + norms

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


FLAVORS: dict[str, ModelArgs] = {
    # CPU flavors. debug: a training step well under a second on one core; dims divisible by 4 so
    # every parameter shards evenly on 1, 2 and 4 ranks (the communication closed form assumes it).
    "debug": ModelArgs(
        name="debug",
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=172,
        vocab_size=512,
        max_seq_len=512,
        default_seq_len=64,
        source="fsdp-bench's own CPU test size",
    ),
    # tiny: ~7 M parameters, the smallest size whose step time is dominated by matmuls, not overhead.
    "tiny": ModelArgs(
        name="tiny",
        dim=256,
        n_layers=4,
        n_heads=8,
        n_kv_heads=4,
        ffn_dim=688,
        vocab_size=8192,
        max_seq_len=2048,
        default_seq_len=256,
        source="fsdp-bench's own CPU benchmark size",
    ),
    # A ~1.1 B model for single-GPU checks: TinyLlama's published shape.
    # https://huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T/blob/main/config.json
    "tinyllama-1.1b": ModelArgs(
        name="tinyllama-1.1b",
        dim=2048,
        n_layers=22,
        n_heads=32,
        n_kv_heads=4,
        ffn_dim=5632,
        vocab_size=32000,
        max_seq_len=2048,
        default_seq_len=2048,
        source="https://huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
    ),
    # Llama-2: Meta's params.json; ffn_dim from the reference code's rounding
    # (multiple_of=256; 70B: ffn_dim_multiplier=1.3, multiple_of=4096).
    # https://github.com/meta-llama/llama/blob/main/llama/model.py and the Llama-2 paper, Table 1.
    "llama2-7b": ModelArgs(
        name="llama2-7b",
        dim=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_dim=11008,
        vocab_size=32000,
        max_seq_len=4096,
        default_seq_len=4096,
        source="https://github.com/meta-llama/llama (7B params.json)",
    ),
    "llama2-13b": ModelArgs(
        name="llama2-13b",
        dim=5120,
        n_layers=40,
        n_heads=40,
        n_kv_heads=40,
        ffn_dim=13824,
        vocab_size=32000,
        max_seq_len=4096,
        default_seq_len=4096,
        source="https://github.com/meta-llama/llama (13B params.json)",
    ),
    "llama2-70b": ModelArgs(
        name="llama2-70b",
        dim=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        ffn_dim=28672,
        vocab_size=32000,
        max_seq_len=4096,
        default_seq_len=4096,
        source="https://github.com/meta-llama/llama (70B params.json, GQA with 8 KV heads)",
    ),
    # Llama-3 8B, to compare with torchtitan's published H100 figures.
    # https://github.com/meta-llama/llama3/blob/main/llama/model.py and torchtitan's llama3 8B flavor.
    "llama3-8b": ModelArgs(
        name="llama3-8b",
        dim=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=14336,
        vocab_size=128256,
        max_seq_len=8192,
        default_seq_len=8192,
        rope_theta=500000.0,
        source="https://github.com/pytorch/torchtitan (llama3 8B flavor)",
    ),
}


def get_flavor(name: str) -> ModelArgs:
    """Look up a flavor by name, with an error listing the known ones."""
    try:
        return FLAVORS[name]
    except KeyError:
        raise ValueError(f"unknown model '{name}'; allowed: {', '.join(FLAVORS)}") from None
