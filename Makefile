.PHONY: setup demo test

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/sweserve demo

test: setup
	.venv/bin/python -m pytest -ra
