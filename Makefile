# The two commands of the README's quick start, plus helpers. Each installs what it needs.
.PHONY: sweep test test-fast bench lint setup image

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

# Benchmarks (not part of `make test`): the engine's tokens/s and overhead, then the hot paths
# (a debug train step, planning, composing, rendering, checking) under pytest-benchmark.
bench:
	scripts/setup.sh dev
	.venv/bin/python scripts/bench_engine.py
	.venv/bin/python -m pytest benchmarks --benchmark-enable -q

lint:
	scripts/setup.sh dev
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/lint-imports

# The cluster image (Dockerfile, docs/containers.md) with docker or podman, whichever answers; says
# so and builds nothing when neither does. IMAGE=<tag> BASE_IMAGE=<image> FSDP_BENCH_EXTRAS=ray.
image:
	scripts/build_image.sh
