"""Regression checks: match points with a baseline, compare counters exactly and timings with statistics.

Torch-free. Modules: thresholds (parsing `tokens_per_s:-5%`), stats (U test, bootstrap CI),
points (records -> comparable points), fingerprint (environment rule), compare (verdicts),
baseline (baseline files), table/junit/summary (outputs).
"""
