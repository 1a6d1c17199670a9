"""The report: tidy frames (bench.analysis.report) -> PNG plots -> one self-contained HTML page, plus
summary.md and results.csv. `reports.report.build.build_report` is the entry point.

Modules: build.py (records in, the report's files out), plots.py, render.py (each figure drawn, a task of a worker pool
for large reports), html.py (Jinja2, templates/), tables.py, table.py (the Table shape, also the history page's, without pandas), summary_md.py, formatting.py,
labels.py, environment.py (the header's environment lines), reproduce.py (the commands that reproduce
the points), telemetry.py, checkpoint.py, cluster_health.py (preflights against the cluster's facts),
autotune.py (the planner's ranking next to the measured one), breakdown.py (where a profiled step went, beside
the planner's split), flag_rules.py (the flags' thresholds the
pages quote, from the metric catalogue).
"""
