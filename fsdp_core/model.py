"""The Llama-2 architecture, readable in one file, with no parallelism code.

RMSNorm, rotary position embeddings, SwiGLU MLP, grouped-query attention and causal
scaled-dot-product attention. Build it on the meta device (`with torch.device("meta")`),
shard it, then call `init_weights()` on the real device: a 70B model is never whole in
one process's memory.
"""

from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from bench.schema.model import ModelSpec


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 for stability under bf16/fp16 compute, as Meta's reference does. One
        # fp32 copy, shared by pow and mul: autograd saves it once (the planner counts it once).
        x_fp32 = x.float()
        normed = x_fp32 * torch.rsqrt(x_fp32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(head_dim: int, seq_len: int, theta: float, device: torch.device) -> torch.Tensor:
    """cos/sin tables of shape (seq_len, head_dim // 2, 2), kept in fp32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv_freq)
    return torch.stack((angles.cos(), angles.sin()), dim=-1)


def apply_rope(x: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of channels of x (batch, seq, heads, head_dim) by position-dependent angles."""
    seq_len = x.shape[1]
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    cos = tables[:seq_len, None, :, 0]
    sin = tables[:seq_len, None, :, 1]
    real = pairs[..., 0] * cos - pairs[..., 1] * sin
    imag = pairs[..., 0] * sin + pairs[..., 1] * cos
    return torch.stack((real, imag), dim=-1).flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, args: ModelSpec) -> None:
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads
        self.head_dim = args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * args.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * args.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        q = self.wq(x).view(batch, seq_len, self.n_heads, self.head_dim)
        k = self.wk(x).view(batch, seq_len, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(batch, seq_len, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, rope), apply_rope(k, rope)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (batch, heads, seq, head_dim)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.n_kv_heads != self.n_heads)
        return self.wo(out.transpose(1, 2).reshape(batch, seq_len, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, ffn_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, ffn_dim, bias=False)
        self.w2 = nn.Linear(ffn_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, ffn_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelSpec) -> None:
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, args.ffn_dim)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """Decoder-only Llama model: tokens (batch, seq) -> logits (batch, seq, vocab)."""

    def __init__(self, args: ModelSpec) -> None:
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        # A ModuleDict keyed by layer index keeps parameter names stable for checkpoints (torchtitan).
        self.layers = nn.ModuleDict({str(i): TransformerBlock(i, args) for i in range(args.n_layers)})
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        # Rotary tables are a non-persistent buffer: rebuilt by init_weights on the real device.
        self.register_buffer(
            "rope",
            rope_tables(args.head_dim, args.max_seq_len, args.rope_theta, torch.device("meta")),
            persistent=False,
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.rope)
        return self.output(self.norm(h))

    @torch.no_grad()
    def init_weights(self, seed: int = 0) -> None:
        """Fill every (unsharded) parameter and rebuild the rotary tables; call off the meta device."""
        self.init_buffers(self.tok_embeddings.weight.device)
        for name, param in self.named_parameters():
            init_parameter_(param, name, self.args, parameter_generator(seed, name, param.device))

    def init_buffers(self, device: torch.device) -> None:
        self.rope = rope_tables(self.args.head_dim, self.args.max_seq_len, self.args.rope_theta, device)


def canonical_name(name: str) -> str:
    """A parameter's name without the wrappers' prefixes (activation checkpointing, torch.compile)."""
    return name.replace("_checkpoint_wrapped_module.", "").replace("_orig_mod.", "")


def parameter_generator(seed: int, name: str, device: torch.device) -> torch.Generator:
    """A generator seeded by (seed, parameter name): the same values on any world size or sharding."""
    digest = int.from_bytes(
        hashlib.blake2b(f"{seed}:{canonical_name(name)}".encode(), digest_size=8).digest(), "little"
    )
    return torch.Generator(device=device).manual_seed(digest & (2**63 - 1))


@torch.no_grad()
def init_parameter_(tensor: torch.Tensor, name: str, args: ModelSpec, generator: torch.Generator) -> None:
    """Initialise one full parameter in place by its name (torchtitan's Llama init scheme)."""
    name = canonical_name(name)
    if name.endswith("norm.weight"):
        nn.init.ones_(tensor)
    elif name == "tok_embeddings.weight":
        nn.init.normal_(tensor, generator=generator)
    elif name == "output.weight":
        std = args.dim**-0.5
        nn.init.trunc_normal_(tensor, mean=0.0, std=std, a=-3 * std, b=3 * std, generator=generator)
    elif name.endswith(("wq.weight", "wk.weight", "wv.weight", "w1.weight")):
        nn.init.trunc_normal_(tensor, mean=0.0, std=0.02, generator=generator)
    elif name.endswith(("wo.weight", "w2.weight", "w3.weight")):
        # Depth-scaled residual projections keep activations bounded as layers stack (torchtitan).
        layer_id = int(name.split(".")[1])
        nn.init.trunc_normal_(tensor, mean=0.0, std=0.02 / math.sqrt(2 * (layer_id + 1)), generator=generator)
    else:
        raise KeyError(f"no init rule for parameter {name}")


def build_model(args: ModelSpec, device: str | torch.device = "meta") -> Transformer:
    """Build the model's structure on `device` (meta by default: no memory is touched)."""
    with torch.device(device):
        return Transformer(args)


def count_parameters(model: nn.Module) -> int:
    """Number of parameters in the full (unsharded) model; works on the meta device."""
    return sum(p.numel() for p in model.parameters())
