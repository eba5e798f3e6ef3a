"""`sweserve images base|env`: build image layers ahead of time."""

from __future__ import annotations

from rich.console import Console

from sweserve.cli.common import add_registry_arg


def register(sub, common) -> None:
    im = sub.add_parser("images", parents=[common], help="build image layers ahead of time")
    im.add_argument("images_cmd", choices=["base", "env"])
    im.add_argument("--profile", default="sglang")
    add_registry_arg(im)
    im.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.image_spec import env_spec
    from sweserve.dataset.profiles import load_profile
    from sweserve.environment.docker_host import docker_client
    from sweserve.environment.images import ImageBuilder, image_exists, read_ca_bundle

    client = docker_client()
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
