"""Layer 3, records in, numbers out: nothing here launches, prints or imports torch.

Modules: records.py (read result records, with migration), sources.py (a folder, one record or a store),
folder_listing.py (a results folder's record files listed, by a process forked before the schema's import),
report_reader.py (a results folder read for the report by two processes),
store.py (the SQLite store), stats.py (the one statistics engine), preflight.py (measurements -> the
preflight record), plan_accuracy.py (predicted next to measured), gc_pause.py (no cyclic GC while a
large object graph is built and kept), forking.py (whether work may go to forked workers here). Packages: check/ (regression
checks), history/ (change points across runs), planner/ (predictions without a GPU), report/ (the
report's frames and aggregates).
"""
