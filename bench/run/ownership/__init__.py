"""Who owns a launch, and what stops it: locks.py (the sweep folder's and the host's locks), jobs.py
(cluster jobs named in launch folders), signals.py (SIGTERM and SIGHUP as Ctrl-C), storage.py (the
one line of a full or read-only disk), cancel.py (`fsdp-bench cancel`).
"""
