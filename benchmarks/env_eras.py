"""Shared env layers per era of the heavy pins vs one per profile, on the real sglang-jax history.

Mines the sgl-project/sglang-jax mirror (the clone benchmarks/mining_speed.py makes) with the built-in
`sglang-jax` profile, locks resolved while mining (`lock_when: mine`, quarter epochs, the lock cache kept in
--cache so a second run resolves nothing), then plans the env images both ways with `shared_dependencies`:

* one layer: the profile's most common lock is the shared layer; every other lock is a thin layer over it,
  and a lock on other jax/jaxlib versions reinstalls them in its "thin" layer;
* per era (`heavy_packages: [jax, jaxlib]`, the built-in profile): each other jax/jaxlib version's most
  common lock is a layer, thin over the first one (jax installed once an era); other locks of that era are
  thin over it.

Bytes: the installed size of jax + jaxlib of the most common era is measured (`uv pip install --no-deps
--target`); the full env image (1.6 GB, docs/real-repos.md) and a same-era thin layer (< 0.01 GB,
benchmarks/env_disk.py) are the measured figures of earlier runs. Other eras' jax/jaxlib are taken to be the
same size as the one measured (said in the output). Needs the package index (PyPI).

    python benchmarks/env_eras.py [--cache DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mining_speed import real_history  # noqa: E402

from sweserve.dataset.image_spec import heavy_pins, image_spec, shared_dependencies  # noqa: E402
from sweserve.dataset.locking import uv_bin  # noqa: E402
from sweserve.dataset.mining import mine, open_repo  # noqa: E402
from sweserve.dataset.profiles import load_profile  # noqa: E402
from sweserve.dataset.taskstore import readable_tasks  # noqa: E402
from sweserve.environment.images import env_image_tag, layered_env_tag  # noqa: E402

GB = 1e9
FULL_GB, THIN_GB = 1.6, 0.01  # measured before: a jax CPU env image; a same-era thin layer (env_disk.py)


def installed_bytes(pins: tuple[str, ...], python: str, platform: str) -> int:
    with tempfile.TemporaryDirectory() as target:
        subprocess.run([uv_bin(), "pip", "install", "-q", "--no-deps", "--target", target, "--python-version", python,
                        "--python-platform", platform, *pins], check=True)
        return sum(f.stat().st_size for f in Path(target).rglob("*") if f.is_file())


def pins(env) -> list[str]:
    return [line for line in env.requirements.splitlines() if "==" in line]


def plan(tasks, profile, heavy: list[str] | None, heavy_gb: float) -> tuple[int, int, int, int, float]:
    """Every env image the tasks' locks need, each counted once (a shared layer is one image): (locks, full
    images, thin layers with the same heavy pins as the layer under them, thin layers that install other heavy
    pins, GB)."""
    shared = shared_dependencies(tasks, {profile.name: heavy} if heavy is not None else None).get(profile.name, [])
    flat = profile.model_copy(update={"heavy_packages": heavy or []})
    images: dict[str, str] = {}  # tag -> full | same | other

    def add(env, under) -> None:
        tag = env_image_tag(env, b"") if under is None else layered_env_tag(env_image_tag(env, b""), env_image_tag(under, b""))
        if under is None:
            images[tag] = "full"
            return
        same = heavy_pins(pins(env), profile.heavy_packages) == heavy_pins(pins(under), profile.heavy_packages)
        images[tag] = "same" if same else "other"
        add(under.model_copy(update={"over": None}), under.over)

    locks = {tuple(t.lock.requirements): t for t in tasks}
    for task in locks.values():
        spec = image_spec(task, flat, shared)
        add(spec.env, spec.shared)
    kinds = Counter(images.values())
    gb = kinds["full"] * FULL_GB + kinds["same"] * THIN_GB + kinds["other"] * (heavy_gb + THIN_GB)
    return len(locks), kinds["full"], kinds["same"], kinds["other"], gb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="/tmp/sweserve-eras-locks", help="lock cache kept between runs")
    args = ap.parse_args()
    history = real_history()
    if history is None:
        return 1
    repo, commits = history
    profile = load_profile("sglang-jax")
    with tempfile.TemporaryDirectory() as tmp:
        mine(open_repo(repo), profile.model_copy(update={"lock_when": "mine"}), Path(tmp) / "tasks",
             lock_cache=Path(args.cache))
        tasks = [t for t in readable_tasks(Path(tmp) / "tasks") if t.lock is not None]
    eras = Counter(heavy_pins(t.lock.requirements, profile.heavy_packages) for t in tasks)
    print(f"{len(tasks)} locked tasks of {commits} commits; {len({tuple(t.lock.requirements) for t in tasks})} "
          f"distinct locks; {len(eras)} eras of {', '.join(profile.heavy_packages)}:")
    for era, n in eras.most_common():
        print(f"  {' '.join(era) or '(none)'}: {n} tasks")
    request = tasks[0].lock_request
    platform = request.platform if request is not None else "x86_64-manylinux_2_40"
    heavy_gb = installed_bytes(eras.most_common(1)[0][0], profile.python, platform) / GB
    print(f"jax + jaxlib installed: {heavy_gb:.2f} GB (the most common era, measured; other eras taken equal)")
    rows = []
    for name, heavy in (("one layer", None), ("per era", profile.heavy_packages)):
        locks, full, same, other, disk = plan(tasks, profile, heavy, heavy_gb)
        rows.append(disk)
        print(f"{name:10s} {locks} locks: {full + same + other} env images, {full} full, {same} thin over the same "
              f"jax, {other} thin installing another jax  ≈ {disk:.1f} GB")
    print(f"ratio one layer / per era: x{rows[0] / rows[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
