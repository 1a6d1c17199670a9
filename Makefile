# The two commands of the README's quick start, plus helpers. Each installs what it needs.
.PHONY: sweep test test-fast bench bench-baseline lint setup image

setup:
	scripts/setup.sh

# The main job: the default CPU sweep (experiment=cpu_smoke): results/cpu_smoke/, its report in results/cpu_smoke/report/.
sweep:
	scripts/setup.sh
	.venv/bin/fsdp-bench sweep

# The whole test suite, with its system services (local Slurm, Chromium) where this machine allows.
test:
	scripts/test.sh

test-fast:
	scripts/setup.sh dev
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest tests/unit -q

# Benchmarks (not part of `make test`): every benchmark (benchmarks/run.py: report, check, store add and history
# of 10,000 records, the pytest-benchmark hot paths) in this checkout and at benchmarks/baseline.json's commit
# (a git worktree), taking turns run by run in the same sitting; exit 1 on one more than 20 % slower than that
# commit (CPU or wall time, significant by check's rule); then the engine's tokens/s (scripts/bench_engine.py). `make
# bench-baseline` takes the baseline on purpose (on a quiet machine, from a committed checkout).
# BENCH_SETUP and BENCH_PYTHON let a checkout use another environment (make bench BENCH_SETUP=true
# BENCH_PYTHON=python); BENCH_ARGS passes flags on (BENCH_ARGS="--only store_add_10k --runs 6").
BENCH_SETUP ?= scripts/setup.sh dev
BENCH_PYTHON ?= .venv/bin/python
BENCH_ARGS ?=
bench:
	$(BENCH_SETUP)
	$(BENCH_PYTHON) benchmarks/run.py $(BENCH_ARGS)
	$(BENCH_PYTHON) scripts/bench_engine.py

bench-baseline:
	$(BENCH_SETUP)
	$(BENCH_PYTHON) benchmarks/run.py --update-baseline

lint:
	scripts/setup.sh dev
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/lint-imports

# The cluster image (Dockerfile, docs/containers.md) with docker or podman, whichever answers; says
# so and builds nothing when neither does. IMAGE=<tag> BASE_IMAGE=<image> FSDP_BENCH_EXTRAS=ray.
image:
	scripts/build_image.sh
