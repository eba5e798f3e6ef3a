.PHONY: setup demo test lint

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/sweserve demo

# ruff (lint rules only; nothing is reformatted) and mypy with the pydantic plugin, both configured in pyproject.toml
lint: setup
	.venv/bin/ruff check sweserve harness images tests benchmarks
	.venv/bin/mypy

# three workers, a test file each (module fixtures stay whole): most tests wait on Docker, sockets or sleeps, so
# even a 2-core machine runs the suite in about half the time of one worker; the 25 slowest are listed at the end
TEST_WORKERS ?= 3

test: setup
	.venv/bin/python -m pytest -ra -n $(TEST_WORKERS) --dist loadfile --durations=25
