"""Regression checks: match points with a baseline, compare counters exactly and timings with statistics.

Torch-free. Modules: gate.py (what `check` decides: load, environment rule, compare), thresholds.py
(parsing `tokens_per_s:-5%`), points.py (records -> comparable points), timings.py (every timing metric
from one comparison of step times), fingerprint.py (the environment rule), compare.py (verdicts),
numerics.py (the numerics guard), power.py (the smallest change a timing's runs can detect:
`not gated` rows), baseline.py (baseline files and loading either side), abtest.py
(A/B rows), synthetic.py (records with controlled step times). Both sides are read and compared in
one process. Statistics come from bench/analysis/stats.py; the outputs (table, JUnit, summary) are
reports/check/.
"""
