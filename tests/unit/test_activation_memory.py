"""The planner's activation model (bench/analysis/planner/activations.py) against the bytes really kept for backward.

Counted, not estimated: one forward of the engine's model (fsdp_core/model.py, parallelised for
checkpointing exactly as the engine does it, parameters in the precision's compute dtype as FSDP2
presents them) under `torch.autograd.graph.saved_tensors_hooks`, whose pack hook sees every tensor
autograd saves (checkpoint's kept block inputs included), deduplicated by storage and without
parameters and buffers; plus the outputs selective_op's policy caches (torch keeps them in the
caching dispatch mode's storage, outside autograd's saved tensors). Tensors are tagged with the region that first saved them: a block, or the root (ids,
final norm, output layer, loss).

Every flavor is counted: `debug` (a micro-batch x sequence grid) and `tiny` with real tensors
(bf16_pure computes in bf16 like bf16, so it is not counted twice); the GPU-sized flavors under
FakeTensorMode, which runs the same kernels' shape logic without allocating, with their own widths,
heads, vocabulary and long sequences but three blocks (every block saves the same, and three give
selective_layer a kept and a skipped block; the planner multiplies by n_layers). A fake count
equals the real one where both run (checked here on `debug`).
"""

from __future__ import annotations

from contextlib import nullcontext
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.checkpoint import create_selective_checkpoint_contexts

import fsdp_core.op_sac as op_sac
from bench.analysis.planner.activations import saved_bytes
from bench.analysis.planner.shapes import llama_shape
from bench.analysis.planner.workload import Workload
from bench.config.compose import flavors, load_preset
from bench.schema.ac_modes import AC_MODES
from fsdp_core.data import SyntheticTokens, local_batch
from fsdp_core.model import build_model
from fsdp_core.parallelize import apply_activation_checkpointing
from fsdp_core.precision import compute_dtype

FLAVORS = flavors()
CPU_PRECISIONS = ("fp32", "bf16", "fp16")
GPU_SIZE_BLOCKS = 3
# (micro_batch, seq_len) per CPU flavor: a grid on `debug`, one shape on the larger `tiny`.
SHAPES = {"debug": ((1, 16), (3, 40)), "tiny": ((2, 24),)}
TOLERANCE = 0.05


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


def flavor_args(flavor: str):
    args = FLAVORS[flavor]
    return args if flavor in ("debug", "tiny") else args.model_copy(update={"n_layers": GPU_SIZE_BLOCKS})


def count_saved(flavor: str, mode: str, precision: str, micro_batch: int, seq_len: int, fake: bool) -> dict[str, int]:
    """Bytes kept for backward at the end of one forward + loss: {"activations": blocks, "logits": root}."""
    args = flavor_args(flavor)
    dtype = compute_dtype(precision)
    caches: list[dict] = []

    def recording_contexts(policy):
        contexts = create_selective_checkpoint_contexts(policy)
        caches.append(contexts[0].storage)
        return contexts

    with (
        FakeTensorMode() if fake else nullcontext(),
        mock.patch.object(op_sac, "create_selective_checkpoint_contexts", recording_contexts),
    ):
        model = build_model(args, "cpu")
        model.init_buffers(torch.device("cpu"))  # the rotary table (values do not matter here)
        for param in model.parameters():  # FSDP2's mixed precision computes with param_dtype copies
            param.data = param.data.to(dtype)
        apply_activation_checkpointing(model, mode)
        static = {_storage(t) for t in [*model.parameters(), *model.buffers()]}
        region, seen = ["root"], {}

        def enter(name):
            return lambda module, inputs: region.__setitem__(0, "blocks")

        for name, block in model.layers.items():
            block.register_forward_pre_hook(enter(name))
            block.register_forward_hook(lambda module, inputs, output: region.__setitem__(0, "root"))

        def note(tensor: torch.Tensor, where: str) -> None:
            key = _storage(tensor)
            if key not in static and key not in seen:
                seen[key] = (where, tensor.untyped_storage().nbytes())

        def pack(tensor):
            note(tensor, region[0])
            return tensor

        if fake:
            inputs = torch.randint(0, args.vocab_size, (micro_batch, seq_len))
            targets = torch.randint(0, args.vocab_size, (micro_batch, seq_len))
        else:
            inputs, targets = local_batch(SyntheticTokens(args.vocab_size, seed=0), 0, 0, 0, micro_batch, seq_len)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            # As fsdp_core/train.py computes it: the logits are not held beyond the loss.
            loss = F.cross_entropy(model(inputs).flatten(0, 1).float(), targets.flatten())
        for cache in caches:
            for entries in cache.values():
                for entry in entries.values():
                    for item in entry if isinstance(entry, (tuple, list)) else [entry]:
                        if isinstance(getattr(item, "val", None), torch.Tensor):
                            note(item.val, "blocks")
        assert loss.requires_grad
    totals = {"activations": 0, "logits": 0}
    for where, nbytes in seen.values():
        totals["activations" if where == "blocks" else "logits"] += nbytes
    return totals


def predicted(flavor: str, mode: str, precision: str, micro_batch: int, seq_len: int) -> dict[str, int]:
    workload = Workload(
        shape=llama_shape(flavor_args(flavor)),
        cluster=load_preset("cluster", "local-cpu"),
        nodes=1,
        gpus_per_node=1,
        strategy="full_shard",
        precision=precision,
        seq_len=seq_len,
        micro_batch=micro_batch,
        activation_checkpointing=mode,
    )
    return saved_bytes(workload)


def assert_close(counted: dict[str, int], expected: dict[str, int], label: str) -> None:
    for part in ("activations", "logits"):
        assert expected[part] == pytest.approx(counted[part], rel=TOLERANCE), (label, part, counted, expected)


@pytest.mark.parametrize("flavor", ["debug", "tiny"])
@pytest.mark.parametrize("mode", AC_MODES)
def test_saved_bytes_match_the_planner_on_cpu(flavor, mode):
    for precision in CPU_PRECISIONS:
        for micro_batch, seq_len in SHAPES[flavor]:
            counted = count_saved(flavor, mode, precision, micro_batch, seq_len, fake=False)
            assert_close(
                counted, predicted(flavor, mode, precision, micro_batch, seq_len), (precision, micro_batch, seq_len)
            )


def test_fake_tensors_count_what_real_ones_do():
    for mode in AC_MODES:
        for precision in ("fp32", "bf16"):
            real = count_saved("debug", mode, precision, 2, 32, fake=False)
            assert count_saved("debug", mode, precision, 2, 32, fake=True) == real, (mode, precision)


@pytest.mark.parametrize("flavor", sorted(set(FLAVORS) - {"debug", "tiny"}))
def test_saved_bytes_match_the_planner_at_gpu_sizes(flavor):
    seq_len = min(FLAVORS[flavor].max_seq_len, 8192)
    for mode in AC_MODES:
        for precision in ("fp32", "bf16"):
            counted = count_saved(flavor, mode, precision, 2, seq_len, fake=True)
            assert_close(counted, predicted(flavor, mode, precision, 2, seq_len), (mode, precision))
