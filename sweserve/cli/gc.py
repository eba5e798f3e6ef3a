"""`sweserve gc`: remove containers left by dead sweserve processes."""

from __future__ import annotations

from rich.console import Console


def register(sub, common) -> None:
    g = sub.add_parser("gc", help="remove containers left by dead sweserve processes")
    g.add_argument("--all", action="store_true", help="remove every sweserve container, live runs' too")
    g.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.environment.docker_host import docker_client
    from sweserve.environment.docker_sandbox import gc

    removed = gc(docker_client(), everything=args.all)
    console.print(f"removed {len(removed)} containers" + (f": {', '.join(removed)}" if removed else ""), markup=False)
    return 0
