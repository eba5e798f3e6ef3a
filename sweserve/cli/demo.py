"""`sweserve demo`: the whole pipeline on the embedded fixture."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console


def register(sub, common) -> None:
    d = sub.add_parser("demo", parents=[common], help="build the fixture repo, mine, validate, run oracle and null")
    d.add_argument("--runs", type=int, default=3, help="validation runs per state (default: 3)")
    d.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.demo.run import run_demo

    return run_demo(Path(args.state_dir), ca_bundle=args.ca_bundle, console=console, runs=args.runs)
