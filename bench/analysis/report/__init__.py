"""The report's numbers: records -> frames and aggregates, no plotting (reports/report/ draws them).

Modules: reading.py (a results folder, store or record read for the report, a big folder's records
by a worker pool), columns.py (records -> the frame's columns, without pandas), digest.py (what the
report needs of many records, small enough to send between processes), digest_cache.py (a folder's rows kept
from one report to the next: only new and changed records are read again), frame.py (the columns -> one row per point), series_keys.py (each point's scaling-series keys,
each configuration's written once), aggregate.py (cells, scaling series, efficiency),
views.py (the aggregated views every output is built from), diagnosis.py (why a point scaled worse
than predicted), contention.py (when a scaling efficiency is suspect: ranks sharing cores),
export.py (CSV and Parquet).
"""
