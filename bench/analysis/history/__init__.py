"""History: change-point detection across runs of the same workload configuration.

Torch-free. Modules: build.py (a store's records -> the History a command shows), series.py (records ->
one series per configuration, ordered by run time, plus the scaling efficiency at each family's largest
node count), detect.py (the change-point detector, Apache Otava's E-divisive means with a Student's
t-test), envdiff.py (what changed in the environment between two runs), analyse.py (change points with
their magnitude, interval, significance and environment change; the numerics guard along each series;
the CI gate), power.py (a series' noise and the smallest shift the gate detects, from the simulated
table data/power.json: `not gated` series), links.py (the cluster's measured links over time), ops.py (the profiled operations that grew at a change point). The
outputs (printed table, summary.md and JUnit XML, history.html with its PNGs) are reports/history/.
"""
