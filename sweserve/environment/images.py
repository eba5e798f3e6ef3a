"""Building the image layers: base (debootstrap | docker import), env per profile, task per task."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from sweserve.dataset.profiles import RepoProfile
from sweserve.errors import SweserveError
from sweserve.models import Task

IMAGES_DIR = Path(__file__).resolve().parent / "dockerfiles"
BASE_PACKAGES = ["python3", "python3-venv", "git", "ca-certificates", "patch", "procps"]
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
REPO_EXCLUDES = "__pycache__/\n*.pyc\n.pytest_cache/\n"


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


class BuildLog:
    """Lines of a long step (a docker build, debootstrap) passed to `log` with the time so far, plus a
    heartbeat line whenever the step has been silent for SWESERVE_HEARTBEAT_S seconds (default 30),
    so a 7-minute pip install inside a build never looks like a hang. Keeps the last lines for errors."""

    def __init__(self, what: str, log, interval: float | None = None):
        self.what, self.log = what, log
        if interval is None:
            try:
                interval = max(0.01, float(os.environ.get("SWESERVE_HEARTBEAT_S", "30")))
            except ValueError:
                interval = 30.0
        self.interval = interval
        self.start = self.last = time.monotonic()
        self.tail: deque[str] = deque(maxlen=4)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="sweserve-build-heartbeat")

    def __enter__(self) -> "BuildLog":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def line(self, text: str) -> None:
        text = text.rstrip()
        if not text.strip():
            return
        self.tail.append(text.strip())
        self.last = time.monotonic()
        self.log(f"  [{_clock(self.last - self.start)}] {self.what}: {text}")

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            if now - self.last >= self.interval * 0.99:
                self.log(f"  [{_clock(now - self.start)}] {self.what}: still running")


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _suite_of(tag: str) -> str:
    return tag.rsplit(":", 1)[1] if ":" in tag else "bookworm"


def build_base_image(tag: str, mirror: str = DEFAULT_MIRROR, log=print) -> None:
    """debootstrap a minimal Debian (suite = the tag's version) and `docker import` it: no registry needed."""
    if shutil.which("debootstrap") is None:
        raise SweserveError(f"cannot build {tag}: debootstrap is not installed (apt-get install -y debootstrap)")
    if os.geteuid() != 0:
        raise SweserveError(f"cannot build {tag}: debootstrap needs root")
    suite = _suite_of(tag)
    with tempfile.TemporaryDirectory(prefix="sweserve-rootfs-") as tmp:
        root = Path(tmp) / "root"
        log(f"debootstrap {suite} into {root} …")
        with BuildLog(f"debootstrap {suite}", log) as out:
            proc = subprocess.Popen(
                ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", suite, str(root), mirror],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            for line in proc.stdout:
                out.line(line)
            proc.wait()
        if proc.returncode != 0:
            raise SweserveError(f"debootstrap {suite} failed: {' | '.join(list(out.tail)[-3:])}")
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        log(f"docker import → {tag}")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise SweserveError(f"docker import of {tag} failed: {imp.stderr.strip()}")


def read_ca_bundle(path: str | None) -> bytes:
    """Extra CA certificates for pip inside images: an explicit path must exist; the default may be absent."""
    if path:
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise SweserveError(f"cannot read CA bundle {path}: {exc.strerror}") from None
    default = Path(DEFAULT_CA_BUNDLE)
    return default.read_bytes() if default.exists() else b""


def env_packages(profile: RepoProfile, dependencies: list[str]) -> list[str]:
    return list(profile.env_packages) + [d for d in dependencies if d not in profile.env_packages]


def env_image_tag(profile: RepoProfile, ca_bundle: bytes, dependencies: list[str] = ()) -> str:
    """One tag per (base, Dockerfile, Python, packages, CA bundle): tasks declaring the same set share it."""
    dockerfile = (IMAGES_DIR / "env" / "Dockerfile").read_bytes()
    h = hashlib.sha256()
    packages = "\n".join(env_packages(profile, list(dependencies)))
    for part in (dockerfile, profile.base_image.encode(), profile.python.encode(), packages.encode(), ca_bundle):
        h.update(hashlib.sha256(part).digest())
    return f"sweserve-env:{profile.name}-{h.hexdigest()[:12]}"


def task_image_tag(task: Task, env_tag: str) -> str:
    env_hash = env_tag.rsplit("-", 1)[-1]
    return f"sweserve-task:{task.task_id.lower()}-{task.base_commit[:10]}-{env_hash}"


def _docker_build(client: docker.DockerClient, context: Path, dockerfile: str, tag: str, buildargs: dict,
                  labels: dict, log=print) -> None:
    """Build with the daemon's output streamed to `log`, a line at a time with the time so far."""
    with BuildLog(f"build {tag}", log) as out:
        try:
            for chunk in client.api.build(path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs,
                                          labels=labels, rm=True, forcerm=True, decode=True):
                if "error" in chunk or "errorDetail" in chunk:
                    out.line(str(chunk.get("error") or chunk["errorDetail"].get("message", "")))
                    raise SweserveError(f"building {tag} failed: {' | '.join(out.tail)}")
                for line in str(chunk.get("stream", "")).splitlines():
                    out.line(line)
        except docker.errors.APIError as exc:
            raise SweserveError(f"building {tag} failed: {exc.explanation or exc}") from None
    if not image_exists(client, tag):
        raise SweserveError(f"building {tag} failed: {' | '.join(out.tail) or 'no image was produced'}")
    log(f"built {tag} in {_clock(time.monotonic() - out.start)}")


def export_repo_at(clone: Path, commit: str, dest: Path) -> None:
    """A fresh repository at dest holding commit and its ancestors only: one branch, no other refs, no reflog."""
    def git(*args: str, cwd: Path = dest) -> None:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            raise SweserveError(f"git {args[0]} for {commit[:12]} failed: {last}")

    dest.mkdir(parents=True)
    git("init", "-q")
    git("-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head",
        str(clone.resolve()), commit)
    git("update-ref", "refs/heads/main", commit)
    git("symbolic-ref", "HEAD", "refs/heads/main")
    git("reset", "-q", "--hard", commit)
    git("reflog", "expire", "--expire=now", "--all")
    git("gc", "-q", "--prune=now")
    (dest / ".git" / "ORIG_HEAD").unlink(missing_ok=True)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(REPO_EXCLUDES)


@dataclass
class ImageBuilder:
    """Builds missing layers on demand; one lock per tag so parallel workers build each image once."""

    client: docker.DockerClient
    ca_bundle: bytes
    log: object = print
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def _lock(self, tag: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(tag, threading.Lock())

    def base(self, profile: RepoProfile) -> str:
        tag = profile.base_image
        with self._lock(tag):
            if not image_exists(self.client, tag):
                if not tag.startswith("sweserve-base:"):
                    raise SweserveError(f"base image {tag} is not present and no registry is used: build or load it first")
                build_base_image(tag, log=self.log)
        return tag

    def env(self, profile: RepoProfile, dependencies: list[str] = ()) -> str:
        tag = env_image_tag(profile, self.ca_bundle, dependencies)
        with self._lock(tag):
            if image_exists(self.client, tag):
                return tag
            base = self.base(profile)
            self.log(f"building env image {tag}")
            with tempfile.TemporaryDirectory(prefix="sweserve-env-") as tmp:
                ctx = Path(tmp)
                shutil.copy(IMAGES_DIR / "env" / "Dockerfile", ctx / "Dockerfile")
                (ctx / "ca-bundle.crt").write_bytes(self.ca_bundle)
                (ctx / "requirements.txt").write_text("\n".join(env_packages(profile, list(dependencies))) + "\n")
                _docker_build(
                    self.client, ctx, "Dockerfile", tag,
                    {"BASE_IMAGE": base, "PYTHON_MIN": profile.python},
                    {"sweserve": "1", "sweserve.profile": profile.name}, log=self.log,
                )
        return tag

    def task(self, task: Task, profile: RepoProfile, clone: Path | None) -> str:
        env_tag = self.env(profile, task.dependencies)
        tag = task_image_tag(task, env_tag)
        with self._lock(tag):
            if image_exists(self.client, tag):
                return tag
            if clone is None:
                raise SweserveError(
                    f"task image for {task.task_id} is not built and no clone of {task.repo} is known: pass --repo-path"
                )
            self.log(f"building task image {tag}")
            with tempfile.TemporaryDirectory(prefix="sweserve-task-") as tmp:
                ctx = Path(tmp)
                shutil.copy(IMAGES_DIR / "task" / "Dockerfile", ctx / "Dockerfile")
                export_repo_at(clone, task.base_commit, ctx / "repo")
                _docker_build(
                    self.client, ctx, "Dockerfile", tag,
                    {"ENV_IMAGE": env_tag, "INSTALL": " && ".join(profile.install)},
                    {"sweserve": "1", "sweserve.task": task.task_id, "sweserve.base_commit": task.base_commit},
                    log=self.log,
                )
        return tag

    def agent(self, task_image: str, agent_name: str, install: list[str]) -> str:
        """The task image plus an agent's install steps (run with network at build time, never in the sandbox)."""
        h = hashlib.sha256("\0".join([task_image, *install]).encode()).hexdigest()[:12]
        tag = f"sweserve-agent:{agent_name.lower()}-{h}"
        with self._lock(tag):
            if image_exists(self.client, tag):
                return tag
            self.log(f"building agent image {tag}")
            with tempfile.TemporaryDirectory(prefix="sweserve-agent-") as tmp:
                ctx = Path(tmp)
                shutil.copy(IMAGES_DIR / "agent" / "Dockerfile", ctx / "Dockerfile")
                _docker_build(self.client, ctx, "Dockerfile", tag,
                              {"TASK_IMAGE": task_image, "INSTALL": " && ".join(f"( {c} )" for c in install)},
                              {"sweserve": "1", "sweserve.agent": agent_name}, log=self.log)
        return tag
