"""Layer 1, what both sides of the rank boundary share (torch-free: pydantic and the standard library).

Modules: spec.py and model.py (the spec; ModelSpec is also the engine's model arguments),
identity.py (what each spec field is to a point's identity), record.py,
env.py, telemetry.py, checkpoint.py, job.py, breakdown.py (the profiled steps' split), hang.py (a hang's verdict) and preflight.py
(the record), job_accounting.py (the whole job's accounting from each attempt's journal), base.py (strict
models, statuses),
options.py (the options that are not part of a point), recipes.py and ac_modes.py (what strategies,
precisions and checkpointing modes mean), flops.py (FLOPs per token), protocol.py (the parent-to-rank
files, the typed launch file among them), protocol_names.py (its names and numbers, without pydantic), devices.py (a runtime device name -> its peaks), files.py (atomic writes), metrics.py (the metric catalogue:
one definition per metric, read by every list of metrics), labels.py (a point's short name), units.py.
Package: migrations/ (the record's migrations).
"""
