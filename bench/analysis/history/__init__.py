"""History: change-point detection across runs of the same workload configuration.

Torch-free. Modules: series (records -> one series per configuration, ordered by run time, plus
the scaling efficiency at each family's largest node count), detect (the change-point detector,
Apache Otava's E-divisive means with a Student's t-test), envdiff (what changed in the environment
between two runs), analyse (change points with their magnitude, interval, significance and
environment change; the numerics guard along each series; the CI gate), table/summary/page
(outputs: the printed table, summary.md and JUnit XML, history.html with its PNGs).
"""
