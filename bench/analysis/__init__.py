"""Layer 3, records in, numbers out: nothing here launches, prints or imports torch.

Modules: records.py (read result records, with migration), sources.py (a folder, one record or a store),
folder_listing.py (a results folder's record files listed in one walk), pool.py (worker processes for
work that splits into independent tasks: concurrent.futures on a forkserver),
stats.py (the one statistics engine), preflight.py (measurements -> the
preflight record), plan_accuracy.py (predicted next to measured), memory_categories.py (FSDP2's
memory tracker beside the planner's breakdown, category by category), hang.py (which rank never entered which collective, from
the ranks' Flight Recorder dumps), slow_hosts.py (hosts that keep holding the slowest rank or a straggler), gc_pause.py (no cyclic GC while a
large object graph is built and kept). Packages: check/ (regression
checks), history/ (change points across runs), store/ (the results store: an SQLite file or a
PostgreSQL database), planner/ (predictions without a GPU), report/ (the report's frames and aggregates).
"""
