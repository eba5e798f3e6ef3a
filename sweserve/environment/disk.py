"""What sweserve's images cost on disk, measured with the Docker API, and which of them can go.

`docker images` prints each image's full size, so N task images over one env image read as N times its
size. The daemon's own accounting (`/system/df`, as `docker system df -v`) knows better: an image's
`SharedSize` is what it shares with other images, and the rest is its own. `usage` sums that per profile:
the disk the images take together (every layer once), the part no other image shares, and the part
shared. `prunable` names what `sweserve gc --images` removes: every sweserve image that no kept task's
image is built on, never the base or proxy images.
"""

from __future__ import annotations

import docker
import docker.errors
from pydantic import BaseModel

KEPT_KINDS = ("base", "proxy")  # built once per machine, from no task


class ImageUse(BaseModel):
    id: str
    tags: list[str]
    kind: str  # base, env, task, agent, proxy, other: the repository of its tag
    profile: str | None = None
    task_id: str | None = None
    base_commit: str | None = None
    parent: str | None = None
    size: int  # the whole image, its parents' layers included
    unique: int  # bytes no other image shares


class ProfileUsage(BaseModel):
    profile: str
    env_images: int = 0
    task_images: int = 0
    images: int = 0
    naive_bytes: int = 0  # what `docker images` adds up to
    disk_bytes: int = 0  # every layer once
    unique_bytes: int = 0
    shared_bytes: int = 0


def sweserve_images(client: docker.DockerClient) -> list[ImageUse]:
    """Every tagged image sweserve built (label sweserve=1, or a sweserve-* repository) with the daemon's
    shared-size accounting (/system/df), and the untagged images between them (kind `intermediate`: the
    classic builder's steps, each the parent of the next; `docker images -a` lists them, /system/df not)."""
    shared = {raw["Id"]: int(raw.get("SharedSize") or 0) for raw in client.df().get("Images") or []}
    out = []
    for raw in client.api.images(all=True):
        tags = [t for t in raw.get("RepoTags") or [] if t != "<none>:<none>"]
        labels = raw.get("Labels") or {}
        if tags and not (labels.get("sweserve") == "1" or any(t.startswith("sweserve-") for t in tags)):
            continue
        repo = tags[0].split(":", 1)[0] if tags else ""
        kind = "intermediate" if not tags else repo.removeprefix("sweserve-") if repo.startswith("sweserve-") else "other"
        size = int(raw.get("Size") or 0)
        out.append(ImageUse(id=raw["Id"], tags=tags, kind=kind, profile=labels.get("sweserve.profile"),
                            task_id=labels.get("sweserve.task"), base_commit=labels.get("sweserve.base_commit"),
                            parent=raw.get("ParentId") or None, size=size,
                            unique=max(0, size - shared[raw["Id"]]) if raw["Id"] in shared else 0))
    return out


def _own_bytes(images: list[ImageUse]) -> dict[str, int]:
    """Each image's bytes above its parent (the classic builder records parents; without one, all of it)."""
    by_id = {i.id: i for i in images}
    return {i.id: i.size - by_id[i.parent].size if i.parent in by_id else i.size for i in images}


def usage(images: list[ImageUse]) -> list[ProfileUsage]:
    """Per profile: env and task images, and their disk counted the daemon's way."""
    own = _own_bytes(images)
    by_id = {i.id: i for i in images}
    profiles: dict[str, ProfileUsage] = {}
    members: dict[str, set[str]] = {}
    for image in images:
        if image.profile is None or image.kind in KEPT_KINDS or image.kind == "intermediate":
            continue
        p = profiles.setdefault(image.profile, ProfileUsage(profile=image.profile))
        p.images += 1
        p.env_images += image.kind == "env"
        p.task_images += image.kind == "task"
        p.naive_bytes += image.size
        p.unique_bytes += image.unique
        chain, at = members.setdefault(image.profile, set()), image.id
        while at in by_id and by_id[at].kind not in KEPT_KINDS and at not in chain:  # down to the base
            chain.add(at)
            at = by_id[at].parent or ""
    for name, p in profiles.items():
        p.disk_bytes = sum(own[i] for i in members[name])
        p.shared_bytes = max(0, p.disk_bytes - p.unique_bytes)
    return sorted(profiles.values(), key=lambda p: p.profile)


def prunable(images: list[ImageUse], keep: set[tuple[str, str]]) -> list[ImageUse]:
    """Images no kept (task id, base commit) is built on: task, agent and checked-out images of other tasks,
    env images under none of the kept ones. Base and proxy images always stay."""
    by_id = {i.id: i for i in images}
    needed: set[str] = set()
    for image in images:
        if image.task_id is not None and (image.task_id, image.base_commit or "") in keep:
            at: str | None = image.id
            while at in by_id and at not in needed:
                needed.add(at)
                at = by_id[at].parent
    return [i for i in images if i.id not in needed and i.kind not in (*KEPT_KINDS, "intermediate")]


def remove(client: docker.DockerClient, images: list[ImageUse]) -> list[str]:
    """Remove images, leaves first; one in use by a container stays. Returns the tags removed."""
    removed = []
    for image in sorted(images, key=lambda i: -i.size):  # an image is larger than its parents: leaves first
        for tag in image.tags:
            try:
                client.images.remove(tag, force=False, noprune=False)
                removed.append(tag)
            except docker.errors.APIError:
                continue  # a container's image, or a parent of an image that stays
    return removed
