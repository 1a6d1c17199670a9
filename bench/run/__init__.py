"""Layer 4, starting and owning ranks: point.py (one point, checked and launched under its locks),
grid.py (a sweep's grid, the same), sweep.py (running a grid), execute.py (a launch -> records),
ledger.py (what still needs to run), autotune.py (`sweep.autotune=K`), preflight.py (a preflight task,
alone or in a launch), calibrate.py (this machine's measurement), ab.py (the A/B rounds). Packages:
launch/ (local, slurm, kubeflow, ray), ownership/ (locks, jobs, signals, storage, cancel).
"""
