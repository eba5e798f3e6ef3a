"""`sweserve images base|env`: build image layers ahead of time."""

from __future__ import annotations

from rich.console import Console

from sweserve.cli.common import console_log


def register(sub, common) -> None:
    im = sub.add_parser("images", parents=[common], help="build image layers ahead of time")
    im.add_argument("images_cmd", choices=["base", "env"])
    im.add_argument("--profile", default="sglang")
    im.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.dataset.profiles import load_profile
    from sweserve.environment.context import docker_client
    from sweserve.environment.images import ImageBuilder, image_exists, read_ca_bundle

    client = docker_client()
    profile = load_profile(args.profile)
    builder = ImageBuilder(client, read_ca_bundle(args.ca_bundle), log=console_log(console))
    if args.images_cmd == "base":
        existed = image_exists(client, profile.base_image)
        tag = builder.base(profile)
    else:
        existed = False
        tag = builder.env(profile)
    console.print(f"{tag}" + (" (already built)" if existed else ""))
    return 0
