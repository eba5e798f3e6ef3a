"""Env images and disk for N real tasks of one quarter, locking on, measured with the Docker API.

Takes the tasks `sweserve mine --profile sglang-jax` wrote (locks on), picks --n tasks merged in --quarter
whose PRs change no dependency file, builds their env images the way a run does (one shared layer of the
pins all their locks share, a thin layer per lock), and prints how many env images they need and their
disk counted once per layer (sweserve.environment.disk), against issue 18's target: at most 2 env images
and 4 GB for 8 tasks of one quarter. Needs Docker, the package index, and sweserve-base:trixie (built on
first use by debootstrap).

    python benchmarks/env_disk.py --tasks /tmp/tasks --quarter 2026Q2 [--n 8] [--keep]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweserve.dataset.image_spec import image_spec, shared_dependencies  # noqa: E402
from sweserve.dataset.patches import touched_paths  # noqa: E402
from sweserve.dataset.profiles import load_profile  # noqa: E402
from sweserve.dataset.taskstore import load_bundle, task_dirs  # noqa: E402
from sweserve.environment.disk import sweserve_images, usage  # noqa: E402
from sweserve.environment.docker_host import docker_client  # noqa: E402
from sweserve.environment.images import ImageBuilder, read_ca_bundle  # noqa: E402

GB = 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, type=Path)
    ap.add_argument("--quarter", required=True, help="e.g. 2026Q2")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--profile", default="sglang-jax")
    args = ap.parse_args()
    year, q = args.quarter.split("Q")
    months = {f"{year}-{m:02d}" for m in range(3 * int(q) - 2, 3 * int(q) + 1)}
    profile = load_profile(args.profile)
    bundles = []
    for d in task_dirs(args.tasks):
        b = load_bundle(d)
        changes_deps = touched_paths(b.oracle_patch + b.tests_patch) & set(profile.dependency_files)
        if b.task.created_at.strftime("%Y-%m") in months and b.task.lock is not None and not changes_deps:
            bundles.append(b)
    bundles = sorted(bundles, key=lambda b: b.task.created_at)[:args.n]
    if len(bundles) < args.n:
        print(f"only {len(bundles)} locked tasks without dependency changes in {args.quarter}")
    tasks = [b.task for b in bundles]
    locks = {tuple(t.lock.requirements) for t in tasks}
    shared = shared_dependencies(tasks, {profile.name: profile.heavy_packages}).get(profile.name, [])
    print(f"{len(tasks)} tasks of {args.quarter}: {len(locks)} distinct locks; {len(shared)} shared layers of "
          f"{', '.join(str(len(layer)) for layer in shared) or 'no'} pins")
    client = docker_client()
    builder = ImageBuilder(client, read_ca_bundle(None))
    started = time.monotonic()
    # the shared layer is the most common lock's own image, so the tasks' tags name every env image they need
    tags = {builder.env(spec.env, spec.shared) for spec in (image_spec(t, profile, shared) for t in tasks)}
    built = time.monotonic() - started
    every = sweserve_images(client)
    ours = {i.id for i in every if set(i.tags) & tags}
    # usage() counts a profile's images down to the base: restrict it to these env images
    rows = usage([i if i.id in ours else i.model_copy(update={"profile": None}) for i in every])
    row = next(r for r in rows if r.profile == profile.name)
    print(f"env images: {len(tags)} (target <= 2: {'met' if len(tags) <= 2 else 'NOT met'})")
    print(f"disk over the base, every layer once: {row.disk_bytes / GB:.2f} GB; unique {row.unique_bytes / GB:.2f} GB, "
          f"shared {row.shared_bytes / GB:.2f} GB; `docker images` would say {row.naive_bytes / GB:.2f} GB "
          f"(target <= 4 GB: {'met' if row.disk_bytes <= 4 * GB else 'NOT met'})")
    print(f"built in {built:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
