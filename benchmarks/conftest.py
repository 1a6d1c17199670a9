"""pytest-benchmark benchmarks of fsdp-bench's own hot paths (not part of the test suite).

Run: `.venv/bin/python -m pytest benchmarks --benchmark-enable` (pyproject's addopts disable
benchmarks by default, and `testpaths = ["tests"]` keeps this folder out of the default run).
Add `--benchmark-json bench.json` to keep the numbers, `--benchmark-compare` to compare runs.
"""
