"""How much a task image adds over its env image, with the repository's history (`ancestors`) and without (`none`).

Target: a lean task image adds no more than 1.2x the working tree's size. Measured on two repositories:

- a generated fixture with a large history (many commits rewriting Python-looking source files), and
- sgl-project/sglang-jax from the local mirror (SWESERVE_SGLANG_JAX_MIRROR, default
  /work/.mirror/sgl-project+sglang-jax/repo), when present. Its snapshot lacks a few blobs of 4 MB and more,
  so the measured commit is HEAD with those files removed (a local commit on top; nothing is committed here).
  Its `ancestors` image cannot be built from the snapshot (the missing blobs are in the history), so only
  `none` is built there and the packed history size is printed for comparison, with what the check-out of
  the tree costs when a container starts (the tree is not in the image: images/task/sweserve-tree).

Run: .venv/bin/python benchmarks/lean_images.py   (needs Docker and sweserve-base:bookworm; ~2 min)
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sweserve.dataset.profiles import load_profile
from sweserve.environment.docker_host import docker_client
from sweserve.environment.images import ImageBuilder, _docker_build, read_ca_bundle, write_task_context

MIRROR = Path(os.environ.get("SWESERVE_SGLANG_JAX_MIRROR", "/work/.mirror/sgl-project+sglang-jax/repo"))
MB = 1024 * 1024


def git(repo: Path, *args: str, input: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b.invalid", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True,
                          input=input).stdout.strip()


def source_like(rng: random.Random, size: int) -> str:
    """Python-looking text of about size bytes: compresses about as well as real sources."""
    words = [f"{a}{b}" for a in ("get", "set", "load", "run", "kv", "attn", "batch", "req", "cache", "token")
             for b in ("_size", "_ids", "_state", "_pool", "_len", "_mask", "_idx", "_out", "_in", "_cfg")]
    lines, n = [], 0
    while n < size:
        line = f"    {rng.choice(words)} = {rng.choice(words)}({rng.choice(words)}, {rng.randrange(10**6)})"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines) + "\n"


def large_history_fixture(dest: Path, commits: int = 150, files: int = 4, size: int = 256 * 1024) -> str:
    """A repository whose history (commits x files x size of freshly generated sources) dwarfs its working tree."""
    rng = random.Random(0)
    git(dest.parent, "init", "-q", "-b", "main", str(dest))
    for i in range(commits):
        for f in range(files):
            (dest / f"module{f}.py").write_text(source_like(rng, size))
        (dest / "src.py").write_text(f"VERSION = {i}\n")
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-m", f"step {i}")
    return git(dest, "rev-parse", "HEAD")


def sglang_jax_fixture(dest: Path) -> str | None:
    """A clone of the mirror and a commit: HEAD without the files whose blobs the snapshot lacks."""
    if not MIRROR.is_dir():
        return None
    git(Path("/"), "clone", "-q", "--bare", str(MIRROR), str(dest))
    tree = git(dest, "ls-tree", "-r", "HEAD")
    check = git(dest, "cat-file", "--batch-check", input="\n".join(line.split()[2] for line in tree.splitlines()))
    missing = {line.split()[0] for line in check.splitlines() if line.endswith("missing")}
    paths = [line.split("\t", 1)[1] for line in tree.splitlines() if line.split()[2] in missing]
    env = {"GIT_INDEX_FILE": str(dest / "bench-index")}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=dest, env={**os.environ, **env}, check=True)
    if paths:
        subprocess.run(["git", "rm", "-q", "--cached", *paths], cwd=dest, env={**os.environ, **env}, check=True,
                       capture_output=True)
    new_tree = subprocess.run(["git", "write-tree"], cwd=dest, env={**os.environ, **env}, check=True,
                              capture_output=True, text=True).stdout.strip()
    return git(dest, "commit-tree", new_tree, "-p", "HEAD", "-m", "bench: HEAD without blobs the snapshot lacks")


def tree_size(repo: Path, commit: str) -> int:
    return sum(int(line.split()[3]) for line in git(repo, "ls-tree", "-r", "-l", commit).splitlines()
               if line.split()[1] == "blob")


def task_layer_size(client, env_tag: str, clone: Path, commit: str, history: str, tag: str) -> int:
    """Bytes the task image adds over env_tag (its own layers only)."""
    with tempfile.TemporaryDirectory(prefix="sweserve-bench-") as tmp:
        ctx = Path(tmp)
        write_task_context(ctx, clone, commit, history)
        _docker_build(client, ctx, "Dockerfile", tag, {"ENV_IMAGE": env_tag, "INSTALL": ""}, {"sweserve": "1"})
    return client.images.get(tag).attrs["Size"] - client.images.get(env_tag).attrs["Size"]


def checkout_seconds(client, tag: str, runs: int = 3) -> float:
    """What the check-out at start costs: `docker run IMAGE true` through the ENTRYPOINT minus without it."""
    def best(**kw) -> float:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            client.containers.run(tag, ["true"], remove=True, **kw)
            times.append(time.perf_counter() - t)
        return min(times)
    return best() - best(entrypoint=["true"])


def remove_images(tags: list[str]) -> None:
    """Best effort, after the numbers are printed (an image delete can wait long on a busy daemon)."""
    for tag in tags:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=300)


def main() -> int:
    client = docker_client()
    builder = ImageBuilder(client, read_ca_bundle(None))
    env_tag = builder.env(load_profile("sglang-demo"))  # the repository's content is what is measured
    rows, built = [], []
    with tempfile.TemporaryDirectory(prefix="sweserve-bench-repos-") as tmp:
        fixture = Path(tmp) / "history"
        commit = large_history_fixture(fixture)
        wt = tree_size(fixture, commit)
        pack = sum(p.stat().st_size for p in (fixture / ".git").rglob("*") if p.is_file())
        for history in ("ancestors", "none"):
            built.append(f"sweserve-bench:history-{history}")
            added = task_layer_size(client, env_tag, fixture, commit, history, built[-1])
            rows.append(("large-history fixture", history, wt, pack, added))
        jax = Path(tmp) / "sglang-jax.git"
        commit = sglang_jax_fixture(jax)
        if commit:
            wt = tree_size(jax, commit)
            pack = sum(p.stat().st_size for p in (jax / "objects").rglob("*") if p.is_file())
            built.append("sweserve-bench:sglang-jax-none")
            added = task_layer_size(client, env_tag, jax, commit, "none", built[-1])
            rows.append(("sglang-jax (mirror HEAD)", "none", wt, pack, added))
            jax_checkout = checkout_seconds(client, built[-1])
    print(f"{'repository':26} {'history':9} {'tree MB':>8} {'.git MB':>8} {'adds MB':>8} {'adds/tree':>9}")
    for name, history, wt, pack, added in rows:
        print(f"{name:26} {history:9} {wt / MB:8.1f} {pack / MB:8.1f} {added / MB:8.1f} {added / wt:9.2f}x")
    if commit:
        print(f"sglang-jax: checking the tree out when a container starts adds {jax_checkout:.2f} s")
    worst = max(added / wt for _, history, wt, _, added in rows if history == "none")
    print(f"lean (history none) worst ratio {worst:.2f}x; target <= 1.20x: {'met' if worst <= 1.2 else 'NOT met'}")
    sys.stdout.flush()
    remove_images(built)
    return 0


if __name__ == "__main__":
    sys.exit(main())
