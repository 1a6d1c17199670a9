"""The planner: predicted memory, fit, step time, throughput and scaling efficiency, without a GPU.

Torch-free. Public entry points: `predict(spec)` (one RunSpec -> a plain JSON-able dict; its
keys are documented in bench/analysis/planner/predict.py), `with_scaling_efficiency(predictions)`
and `predict_grid(specs)` (every point's plan object, the one JSON shape of a predicted point).
Modules, one job each: shapes.py (per-parameter shapes), workload.py (the planner's input),
memory.py, activations.py (activation memory per checkpointing mode), comm.py (bytes and ring times),
compute.py (FLOPs split and rates), fp8.py, step.py (overlap timeline), checkpoint.py (a DCP save's
bytes and time), failures.py (the job's MTBF, Young's and Daly's checkpoint interval, dollars per token), calibration.py (fitted and measured per-device numbers), fit.py and published.py
(the comparison with published figures, data/), from_preflight.py (links a preflight measured),
search.py (`plan --best`), skip.py (`sweep.plan=true`'s skipped records), plan_object.py (the plan
object and its `--fields`).
"""

from bench.analysis.planner.predict import predict, predict_grid, predict_workload, with_scaling_efficiency

__all__ = ["predict", "predict_grid", "predict_workload", "with_scaling_efficiency"]
