"""Disk for the env images of one repository's tasks: one full image per dependency set, vs a shared layer.

Fixture shaped like sglang-omni: 25 tasks declaring 12 different dependency sets. Every set holds the same
heavy core (a fake torch, fake CUDA libraries, the bulk of a pinned lock) and differs in a few small
packages. The packages are small fake wheels with incompressible payloads, served from a local index on
127.0.0.1 (the builds use the host's network to reach it), so this runs offline except for swe-rex, which
every env image installs from PyPI.

- before: each dependency set is a full env image FROM the base (what sweserve did without shared layers)
- after:  one shared env image of what all 25 tasks declare (the intersection), and per set a thin layer
          FROM it installing the rest

Disk counts shared layers once: images form a tree of FROM parents, so the total is the base plus, for
each image, its size minus its parent's (`docker system df -v` agrees).

Run: .venv/bin/python benchmarks/env_layers.py   (needs Docker, sweserve-base:bookworm; ~10 min on 2 cores)
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

from sweserve.dataset.image_spec import env_spec, shared_dependencies
from sweserve.dataset.profiles import load_profile
from sweserve.environment.docker_host import docker_client
from sweserve.environment.images import ImageBuilder, read_ca_bundle

MB = 1024 * 1024
CORE = {"faketorch": 40, "fake-nvidia-cudnn": 20, "fake-lock-bulk": 10}  # MB of payload each
EXTRAS = ["fake-transformers", "fake-diffusers", "fake-librosa", "fake-vllm-omni", "fake-xformers", "fake-timm"]


def wheel(dest: Path, name: str, version: str, payload_mb: float) -> None:
    """A pure-Python wheel with an incompressible payload (pip verifies nothing more than this needs)."""
    mod = name.replace("-", "_")
    files = {f"{mod}/__init__.py": f"__version__ = '{version}'\n".encode(),
             f"{mod}/payload.bin": os.urandom(int(payload_mb * MB))}
    info = f"{mod}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: sweserve-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                     for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    folder = dest / "simple" / name
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{mod}-{version}-py3-none-any.whl", "w", zipfile.ZIP_STORED) as z:
        for p, d in files.items():
            z.writestr(p, d)


def fixture(index: Path) -> list[SimpleNamespace]:
    """25 tasks, 12 dependency sets: the core for all, two of six extras at one of two versions per set."""
    for name, size in CORE.items():
        wheel(index, name, "1.0", size)
    for name in EXTRAS:
        for version in ("1.0", "1.1"):
            wheel(index, name, version, 1)
    sets = []
    for i in range(12):
        a, b = EXTRAS[i % 6], EXTRAS[(i + 1 + i // 6) % 6]
        sets.append(sorted(f"{n}==1.0" for n in CORE) + [f"{a}=={'1.1' if i >= 6 else '1.0'}", f"{b}==1.0"])
    assert len({tuple(s) for s in sets}) == 12
    return [SimpleNamespace(task_id=f"omni-{t}", profile="omni-bench", dependencies=sets[t % 12]) for t in range(25)]


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def main() -> int:
    client = docker_client()
    with tempfile.TemporaryDirectory(prefix="sweserve-bench-index-") as tmp:
        tasks = fixture(Path(tmp))
        server, port = serve(Path(tmp))
        profile = load_profile("sglang-demo").model_copy(update={
            "name": "omni-bench", "env_packages": [], "index_url": f"http://127.0.0.1:{port}/simple/"})
        builder = ImageBuilder(client, read_ca_bundle(None), build_network="host")
        base = builder.base(profile)
        size = lambda tag: client.images.get(tag).attrs["Size"]  # noqa: E731
        sets = sorted({tuple(t.dependencies) for t in tasks})
        built: list[str] = []
        try:
            t0 = time.monotonic()
            before = [builder.env(env_spec(profile, list(s))) for s in sets]
            t_before = time.monotonic() - t0
            built += before
            disk_before = size(base) + sum(size(t) - size(base) for t in before)
            [shared] = shared_dependencies(tasks)["omni-bench"]
            t0 = time.monotonic()
            after = [builder.env(env_spec(profile, list(s)), env_spec(profile, shared)) for s in sets]
            t_after = time.monotonic() - t0
            common = builder.env(env_spec(profile, shared))
            built += [common, *after]
            disk_after = size(base) + (size(common) - size(base)) + sum(size(t) - size(common) for t in after)
        finally:
            server.shutdown()
    print(f"{len(tasks)} tasks, {len(sets)} dependency sets; shared by all: {', '.join(shared)}")
    print(f"{'layout':34} {'images':>6} {'disk MB':>8} {'build s':>8}")
    print(f"{'before: a full env image per set':34} {len(before):6d} {disk_before / MB:8.0f} {t_before:8.0f}")
    print(f"{'after: shared layer + thin layers':34} {len(after) + 1:6d} {disk_after / MB:8.0f} {t_after:8.0f}")
    print(f"disk after / before: {disk_after / disk_before:.2f} ({disk_before / disk_after:.1f}x less)")
    sys.stdout.flush()
    for tag in reversed(built):  # best effort, after the numbers: only images this script built
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
