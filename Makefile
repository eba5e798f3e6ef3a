.PHONY: setup demo test lint

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/sweserve demo

# ruff (lint rules only; nothing is reformatted) and mypy with the pydantic plugin, both configured in pyproject.toml
lint: setup
	.venv/bin/ruff check sweserve harness images tests benchmarks
	.venv/bin/mypy

test: setup
	.venv/bin/python -m pytest -ra
