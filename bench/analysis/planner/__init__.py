"""The planner: predicted memory, fit, step time, throughput and scaling efficiency, without a GPU.

Torch-free. Public entry points: `predict(spec)` (one RunSpec -> a plain JSON-able dict; its
keys are documented in bench/analysis/planner/predict.py), `with_scaling_efficiency(predictions)`
and `predict_grid(specs)` (every point's plan object, the one JSON shape of a predicted point:
bench/analysis/planner/plan_object.py).
Modules, one job each: shapes (per-parameter shapes), workload (the planner's input),
memory, comm (bytes and ring times), compute (FLOPs split and rates), step (overlap timeline),
calibration (fitted and measured per-device numbers), fit and published (the CSV comparison).
"""

from bench.analysis.planner.predict import predict, predict_grid, predict_workload, with_scaling_efficiency

__all__ = ["predict", "predict_grid", "predict_workload", "with_scaling_efficiency"]
