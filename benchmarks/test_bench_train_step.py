"""One `debug` training step (forward, backward, AdamW) of the FSDP2-wrapped model, in-process.

A world of one gloo rank: the step runs the same fully_shard hooks as a real point, without the
launcher's process start-up, so changes to the model, parallelisation or loop show up here.
"""

from __future__ import annotations

import pytest

from bench.run.launch.ports import free_port

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def debug_training(monkeypatch_module):
    import torch.distributed as dist

    from bench.config.compose import spec_from_fields
    from fsdp_core.data import build_source
    from fsdp_core.worker import build_training

    spec = spec_from_fields(model="debug", seq_len=64, micro_batch=2)
    for key, value in {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
    }.items():
        monkeypatch_module.setenv(key, value)
    dist.init_process_group("gloo")
    # One thread: OpenMP workers spin-wait on each other, so on a busy 2-core machine a second
    # thread makes the step time depend on the neighbours' load more than on the code.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, optimizer, scaler = build_training(spec, torch.device("cpu"))
    source = build_source(spec.train.data, spec.model.vocab_size, spec.train.seed)
    yield model, optimizer, scaler, source, spec
    dist.destroy_process_group()
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_debug_train_step(benchmark, debug_training):
    from fsdp_core.train import train_step

    model, optimizer, scaler, source, spec = debug_training
    device = torch.device("cpu")
    steps = iter(range(10**9))
    # Fixed rounds after warm-up steps: pytest-benchmark sizes its rounds from the first call, which
    # carries the optimizer's lazy state set-up, and would time only its minimum of 5.
    loss = benchmark.pedantic(
        lambda: train_step(model, optimizer, scaler, source, spec, next(steps), device), rounds=30, warmup_rounds=3
    )
    assert float(loss) > 0
    benchmark.extra_info["tokens_per_step"] = spec.tokens_per_step
