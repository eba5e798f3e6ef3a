"""`sweserve images base|env|du`: build image layers ahead of time, or see what they cost on disk."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sweserve.cli.common import add_registry_arg


def register(sub, common) -> None:
    im = sub.add_parser("images", parents=[common],
                        help="build image layers ahead of time (base, env), or show their disk use (du)")
    im.add_argument("images_cmd", choices=["base", "env", "du"])
    im.add_argument("--profile", default="sglang")
    im.add_argument("--json", action="store_true", help="du: print the usage as JSON")
    add_registry_arg(im)
    im.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.image_spec import env_spec
    from sweserve.dataset.profiles import load_profile
    from sweserve.environment.docker_host import docker_client
    from sweserve.environment.images import ImageBuilder, image_exists, read_ca_bundle

    client = docker_client()
    if args.images_cmd == "du":
        return disk_usage(client, args, console)
    profile = load_profile(args.profile, ConfigSearch.for_project(args.state_dir))
    builder = ImageBuilder(client, read_ca_bundle(args.ca_bundle), registry=args.registry)
    if args.images_cmd == "base":
        existed = image_exists(client, profile.base_image)
        tag = builder.base(profile.base_image)
    else:
        existed = False
        tag = builder.env(env_spec(profile))
    console.print(f"{tag}" + (" (already built)" if existed else ""), markup=False)
    return 0


def disk_usage(client, args, console: Console) -> int:
    """Per profile: env and task images, disk as the daemon counts it, and what `gc --images` would free."""
    import json

    from rich.table import Table

    from sweserve.dataset.taskstore import readable_tasks
    from sweserve.environment.disk import prunable, sweserve_images, usage

    images = sweserve_images(client)
    rows = usage(images)
    keep = {(t.task_id, t.base_commit) for t in readable_tasks(Path(args.tasks)) if t.validated}
    spare = prunable(images, keep)
    spare_bytes = sum(i.unique for i in spare)
    if args.json:
        print(json.dumps({"profiles": [r.model_dump() for r in rows],
                          "prunable": {"images": [t for i in spare for t in i.tags], "bytes": spare_bytes}}, indent=2))
        return 0
    table = Table("profile", "env images", "task images", "disk", "unique", "shared", "docker images says")
    for r in rows:
        table.add_row(r.profile, str(r.env_images), str(r.task_images), _size(r.disk_bytes), _size(r.unique_bytes),
                      _size(r.shared_bytes), _size(r.naive_bytes))
    console.print(table)
    console.print(f"{len(spare)} image{'s' if len(spare) != 1 else ''} no validated task of {args.tasks} uses "
                  f"({_size(spare_bytes)} of their own): `sweserve gc --images` removes them", markup=False,
                  soft_wrap=True)
    return 0


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
