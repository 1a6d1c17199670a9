"""Inside each rank (torch): worker.py (the torchrun entry point), model.py, parallelize.py (FSDP2),
precision.py, op_sac.py (per-op activation checkpointing), ops.py (op lookup tolerant of a torch
without some op), data.py, train.py (the timed loop), checkpoint.py (DCP), checkpoint_staging.py
(async saves' host buffers), metrics.py, comm_counter.py, compile_stats.py, telemetry.py,
telemetry_readers.py, telemetry_summary.py, preflight.py, lifeline.py (processes that die with their
parent), job.py (the whole job's clock, the attempts' journals and the debug kills), profiling.py (profiled
steps and their traces), step_split.py (a trace -> compute, communication and idle; torch-free),
debug_knobs.py (the in-step slow-down knobs), flight_recorder.py (the Flight Recorder dump of a hung point),
memory_categories.py (a step under FSDP2's memory tracker), memory_history.py (the CUDA allocator's
history and its snapshot on an out-of-memory), allocations.py (a snapshot's live allocations by category;
torch-free). Imports bench.schema and nothing else of bench.
"""
