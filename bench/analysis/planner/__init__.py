"""The planner: predicted memory, fit, step time, throughput and scaling efficiency, without a GPU.

Torch-free. Public entry points: `predict(spec)` (one RunSpec -> a plain JSON-able dict; its
keys are documented in bench/analysis/planner/predict.py) and `with_scaling_efficiency(predictions)`.
Modules, one job each: shapes (per-parameter shapes), workload (the planner's input),
memory, comm (bytes and ring times), compute (FLOPs split and rates), step (overlap timeline),
calibration (fitted and measured per-device numbers), fit and published (the CSV comparison).
"""

from bench.analysis.planner.predict import predict, predict_workload, with_scaling_efficiency

__all__ = ["predict", "predict_workload", "with_scaling_efficiency"]
