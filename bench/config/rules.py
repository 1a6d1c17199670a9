"""The rules a new point must satisfy before it launches (never applied to stored records: a record
measured under older rules stays readable). Each rule returns a one-line problem naming the config
key, or None."""

from __future__ import annotations

from bench.schema import ac_modes
from bench.schema.recipes import PRECISIONS
from bench.schema.spec import RunSpec


# Rules a new point must satisfy before it launches (never applied to stored records): each
# returns a one-line problem naming the config key, or None.
def _seq_len_rule(spec: RunSpec) -> str | None:
    if spec.train.seq_len > spec.model.max_seq_len:
        return f"train.seq_len: {spec.train.seq_len} exceeds {spec.model.name}'s maximum {spec.model.max_seq_len}"
    return None


def _warmup_rule(spec: RunSpec) -> str | None:
    train = spec.train
    if train.warmup_steps >= train.steps:
        return f"train.warmup_steps: must be fewer than train.steps ({train.warmup_steps} >= {train.steps})"
    if train.compile and train.warmup_steps < 2:
        # The last warm-up step runs eager (it counts communication): with one warm-up step,
        # compilation would land in the first timed step.
        return f"train.warmup_steps: train.compile=true needs at least 2 warm-up steps, got {train.warmup_steps}"
    return None


def _device_rule(spec: RunSpec) -> str | None:
    recipe = PRECISIONS[spec.precision]
    if spec.device_type not in recipe.device_types:
        allowed = ", ".join(p for p, r in PRECISIONS.items() if spec.device_type in r.device_types)
        return (
            f"precision: {spec.precision} needs a CUDA GPU ({recipe.summary}); allowed on {spec.device_type}: {allowed}"
        )
    peaks = spec.cluster.peak_tflops
    if spec.device_type == "cuda" and recipe.peak_dtype not in peaks:
        allowed = ", ".join(p for p, r in PRECISIONS.items() if r.peak_dtype in peaks and "cuda" in r.device_types)
        return f"precision: {spec.cluster.name}'s devices have no {recipe.peak_dtype} tensor cores; allowed: {allowed}"
    if spec.profile.memory_history and spec.device_type != "cuda":
        return f"profile.memory_history: needs a CUDA cluster; {spec.cluster.name}'s device_type is {spec.device_type}"
    if spec.train.cpu_offload and spec.device_type != "cuda":
        return "train.cpu_offload: offloads GPU state to host memory, so it needs a CUDA cluster; allowed on CPU: false"
    if spec.device_type == "cuda" and spec.gpus_per_node > spec.cluster.gpus_per_node:
        return (
            f"gpus_per_node: {spec.gpus_per_node} exceeds the {spec.cluster.gpus_per_node} GPUs of a "
            f"{spec.cluster.name} node; allowed: 1..{spec.cluster.gpus_per_node}"
        )
    return None


def _debug_rule(spec: RunSpec) -> str | None:
    """A fault aimed at a rank or step this point does not have would silently never fire; a late rank
    with no peer to wait for it delays nothing but itself."""
    knobs = spec.debug
    if knobs.fail_rank is not None and knobs.fail_rank >= spec.world_size:
        return f"debug.fail_rank: {knobs.fail_rank} is not a rank of this point; allowed: 0..{spec.world_size - 1}"
    if knobs.fail_step is not None and knobs.fail_step >= spec.train.steps:
        return f"debug.fail_step: {knobs.fail_step} is not a step of this point; allowed: 0..{spec.train.steps - 1}"
    if knobs.slow_rank is not None and knobs.slow_rank >= spec.world_size:
        return f"debug.slow_rank: {knobs.slow_rank} is not a rank of this point; allowed: 0..{spec.world_size - 1}"
    if knobs.comm_delay_ms > 0 and spec.world_size == 1:
        return "debug.comm_delay_ms: needs a world size above 1 (no peer waits for a late rank); allowed: 0"
    return None


def _kill_rule(spec: RunSpec) -> str | None:
    """Kills that could never fire, or a point that could never resume after one."""
    knobs, train = spec.debug, spec.train
    steps = knobs.kill_steps or []
    if any(b <= a for a, b in zip(steps, steps[1:])) or any(s < 0 for s in steps):
        return f"debug.kill_steps: must be strictly increasing steps >= 0, got {steps}"
    if steps and steps[-1] >= train.steps:
        return f"debug.kill_steps: {steps[-1]} is not a step of this point; allowed: 0..{train.steps - 1}"
    if knobs.kill_rank is not None and knobs.kill_rank >= spec.world_size:
        return f"debug.kill_rank: {knobs.kill_rank} is not a rank of this point; allowed: 0..{spec.world_size - 1}"
    if knobs.kills and train.checkpoint == "none":
        key = "debug.kill_steps" if steps else "debug.kill_mtbf_s"
        return f"{key}: a killed point resumes from its latest checkpoint, and train.checkpoint is none; allowed: sync, async"
    return None


def _ac_rule(spec: RunSpec) -> str | None:
    """A checkpointing knob set for a mode it does not tune would silently do nothing."""
    train = spec.train
    mode = train.activation_checkpointing
    if train.ac_every != ac_modes.DEFAULT_AC_EVERY and mode != ac_modes.SELECTIVE_LAYER:
        return f"train.ac_every: tunes selective_layer only, but train.activation_checkpointing is {mode}"
    if train.ac_save_ops is not None and mode != ac_modes.SELECTIVE_OP:
        return f"train.ac_save_ops: tunes selective_op only, but train.activation_checkpointing is {mode}"
    return None


def _checkpoint_rule(spec: RunSpec) -> str | None:
    """Saves happen after timed steps: an interval needs a mode and must fit in the timed steps."""
    train = spec.train
    timed = train.steps - train.warmup_steps
    if train.checkpoint_every is None:
        return None
    if train.checkpoint_every > timed:
        return (
            f"train.checkpoint_every: {train.checkpoint_every} is beyond the {timed} timed steps "
            f"(train.steps - train.warmup_steps); allowed: 1..{timed}"
        )
    return None


LAUNCH_RULES = (_seq_len_rule, _warmup_rule, _device_rule, _debug_rule, _kill_rule, _ac_rule, _checkpoint_rule)


def launch_problems(spec: RunSpec) -> list[str]:
    """Every rule a new point breaks (one line each, naming the config key); empty when it may launch."""
    return [message for rule in LAUNCH_RULES if (message := rule(spec))]
