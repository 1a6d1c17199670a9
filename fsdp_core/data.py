"""Token batches: synthetic (default) or windows of a token file.

Every global row (step, micro-step, row) is drawn from its own seeded generator, and each
rank takes its rows of the global batch: the data depend on the global batch, not on how it
is split, so world size 1 and 2 see the same tokens (the loss-equality test relies on it).

Synthetic sequences are learnable (arithmetic progressions modulo the vocabulary, a random
start and stride per row), so a falling loss shows the model really trains.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

MAX_STRIDE = 7  # strides 1..7: enough variety that the model must read the context


def _row_seed(seed: int, step: int, micro: int, row: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{step}:{micro}:{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class SyntheticTokens:
    """Arithmetic progressions modulo vocab_size, one per row."""

    def __init__(self, vocab_size: int, seed: int) -> None:
        self.vocab_size, self.seed = vocab_size, seed

    def row(self, step: int, micro: int, row: int, length: int) -> torch.Tensor:
        gen = np.random.default_rng(_row_seed(self.seed, step, micro, row))
        start = int(gen.integers(self.vocab_size))
        stride = int(gen.integers(1, MAX_STRIDE + 1))
        return (start + stride * torch.arange(length, dtype=torch.int64)) % self.vocab_size


class TokenFile:
    """Random windows of a flat token file (a memmap of uint16, or uint32 when the name ends in .u32)."""

    def __init__(self, path: str, vocab_size: int, seed: int) -> None:
        dtype = np.uint32 if path.endswith(".u32") else np.uint16
        if not Path(path).is_file():
            raise FileNotFoundError(f"train.data: token file {path} does not exist")
        self.tokens = np.memmap(path, dtype=dtype, mode="r")
        self.vocab_size, self.seed = vocab_size, seed

    def row(self, step: int, micro: int, row: int, length: int) -> torch.Tensor:
        if len(self.tokens) <= length:
            raise ValueError(f"train.data: token file has {len(self.tokens)} tokens, fewer than seq_len + 1 = {length}")
        offset = _row_seed(self.seed, step, micro, row) % (len(self.tokens) - length)
        window = np.asarray(self.tokens[offset : offset + length], dtype=np.int64)
        return torch.from_numpy(window) % self.vocab_size


def build_source(data: str, vocab_size: int, seed: int) -> SyntheticTokens | TokenFile:
    return SyntheticTokens(vocab_size, seed) if data == "synthetic" else TokenFile(data, vocab_size, seed)


def local_batch(
    source, step: int, micro: int, dp_rank: int, micro_batch: int, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's (inputs, targets), each (micro_batch, seq_len), of the global micro-batch."""
    rows = [source.row(step, micro, dp_rank * micro_batch + i, seq_len + 1) for i in range(micro_batch)]
    tokens = torch.stack(rows)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
