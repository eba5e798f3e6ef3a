"""`sweserve gc`: remove containers left by dead sweserve processes, and (--images) images no task needs."""

from __future__ import annotations

from rich.console import Console


def register(sub, common) -> None:
    g = sub.add_parser("gc", parents=[common], help="remove containers left by dead sweserve processes")
    g.add_argument("--all", action="store_true", help="remove every sweserve container, live runs' too")
    g.add_argument("--images", action="store_true",
                   help="also remove sweserve images that no validated task of --tasks is built on "
                        "(base and proxy images stay)")
    g.add_argument("--dry-run", action="store_true", help="with --images: list them, remove nothing")
    g.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.environment.docker_host import docker_client
    from sweserve.environment.docker_sandbox import gc

    client = docker_client()
    removed = gc(client, everything=args.all)
    console.print(f"removed {len(removed)} containers" + (f": {', '.join(removed)}" if removed else ""), markup=False)
    if args.images:
        from pathlib import Path

        from sweserve.dataset.taskstore import readable_tasks
        from sweserve.environment.disk import prunable, remove, sweserve_images

        keep = {(t.task_id, t.base_commit) for t in readable_tasks(Path(args.tasks)) if t.validated}
        spare = prunable(sweserve_images(client), keep)
        if args.dry_run:
            for image in spare:
                console.print(f"would remove {', '.join(image.tags)}", markup=False)
            return 0
        tags = remove(client, spare)
        console.print(f"removed {len(tags)} images, kept those of {len(keep)} validated tasks", markup=False)
    return 0
