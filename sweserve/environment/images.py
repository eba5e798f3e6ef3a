"""Building the image layers: base (debootstrap | docker import), env per dependency set, task per task.

Images are built from an `ImageSpec` (`sweserve/models.py`, computed by `dataset/image_spec.py`): plain values,
never a profile. `image_tags` is the one function that derives an image's tags from its spec; the builder and
`sweserve export` both use it. The Dockerfiles are package data (`images/`), read with
importlib.resources.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import docker
import docker.errors

from sweserve.errors import InfraError, SweserveError
from sweserve.gitcmd import GitError, reason, run_git
from sweserve.gitcmd import subcommand as git_subcommand  # noqa: F401  (its old name here)
from sweserve.heartbeat import Heartbeat, clock
from sweserve.models import EnvSpec, ImageSpec

log = logging.getLogger(__name__)
BASE_PACKAGES = ["python3", "python3-venv", "git", "ca-certificates", "patch", "procps"]
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PROXY_BASE = "sweserve-base:bookworm"  # Python 3.11: mitmproxy 11.0 is the last release for it
REPO_EXCLUDES = "__pycache__/\n*.pyc\n.pytest_cache/\n"


LOG_LINE_CHARS = 200  # of each line of build output shown in the log (the tail kept for errors is whole)


class BuildLog:
    """Lines of a long step (a docker build, debootstrap) passed to `log` with the time so far, plus a
    heartbeat line whenever the step has been silent for SWESERVE_HEARTBEAT_S seconds (default 30),
    so a 7-minute pip install inside a build never looks like a hang. Keeps the last lines for errors."""

    def __init__(self, what: str, log, interval: float | None = None):
        self.what, self.log = what, log
        self.start = self.last = time.monotonic()
        self.tail: deque[str] = deque(maxlen=4)
        self._heartbeat = Heartbeat(self._beat, interval, name="sweserve-build-heartbeat")
        self.interval = self._heartbeat.interval

    def __enter__(self) -> "BuildLog":
        self._heartbeat.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._heartbeat.__exit__(*exc)

    def line(self, text: str) -> None:
        text = text.rstrip()
        if not text.strip():
            return
        self.tail.append(text.strip())
        self.last = time.monotonic()
        shown = text if len(text) <= LOG_LINE_CHARS else text[:LOG_LINE_CHARS - 1] + "…"  # a RUN line can be huge
        self.log(f"  [{clock(self.last - self.start, hours=False)}] {self.what}: {shown}")

    def _beat(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.interval * 0.99:  # silent for a whole interval
            self.log(f"  [{clock(now - self.start, hours=False)}] {self.what}: still running")


TREE_SCRIPT = "sweserve-tree"  # checks a task image's tracked files out when its container starts (task/)


def dockerfile(layer: str, name: str = "Dockerfile") -> bytes:
    """The Dockerfile (or another build file) of one layer (env, task, agent, proxy), from the installed package."""
    return resources.files("sweserve.images").joinpath(layer, name).read_bytes()


def checked_out_tag(task_image: str) -> str:
    """The tag of a task image's checked-out variant (the task tag already hashes all it is made of)."""
    digest = hashlib.sha256(dockerfile("checked-out")).hexdigest()[:6]
    return f"{task_image}-tree{digest}"


def write_task_context(dest: Path, clone: Path, commit: str, history: str, leave_out: Sequence[str] = ()) -> None:
    """A task image's build context: its Dockerfile, the sweserve-tree script and the repository at commit."""
    (dest / "Dockerfile").write_bytes(dockerfile("task"))
    (dest / TREE_SCRIPT).write_bytes(dockerfile("task", TREE_SCRIPT))
    (dest / TREE_SCRIPT).chmod(0o755)
    export_repo_at(clone, commit, dest / "repo", history, leave_out)


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.DockerException as exc:
        raise InfraError("docker", f"looking up image {tag}: {exc}") from None


def _suite_of(tag: str) -> str:
    return tag.rsplit(":", 1)[1] if ":" in tag else "bookworm"


def build_base_image(tag: str, mirror: str = DEFAULT_MIRROR) -> None:
    """debootstrap a minimal Debian (suite = the tag's version) and `docker import` it: no registry needed."""
    if shutil.which("debootstrap") is None:
        raise SweserveError(f"cannot build {tag}: debootstrap is not installed (apt-get install -y debootstrap)")
    if os.geteuid() != 0:
        raise SweserveError(f"cannot build {tag}: debootstrap needs root")
    suite = _suite_of(tag)
    with tempfile.TemporaryDirectory(prefix="sweserve-rootfs-") as tmp:
        root = Path(tmp) / "root"
        log.info("debootstrap %s into %s …", suite, root)
        with BuildLog(f"debootstrap {suite}", log.info) as out:
            proc = subprocess.Popen(
                ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", suite, str(root), mirror],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            assert proc.stdout is not None  # a pipe
            for line in proc.stdout:
                out.line(line)
            proc.wait()
        if proc.returncode != 0:
            raise InfraError("image_build", f"debootstrap {suite} failed: {' | '.join(list(out.tail)[-3:])}")
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        log.info("docker import → %s", tag)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None  # a pipe
        imp = subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise InfraError("image_build", f"docker import of {tag} failed: {imp.stderr.strip()}")


def read_ca_bundle(path: str | None) -> bytes:
    """Extra CA certificates for pip inside images: an explicit path must exist; the default may be absent."""
    if path:
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise SweserveError(f"cannot read CA bundle {path}: {exc.strerror}") from None
    default = Path(DEFAULT_CA_BUNDLE)
    return default.read_bytes() if default.exists() else b""


def index_parts(env: EnvSpec) -> list[bytes]:
    """What of the package index an env image depends on (nothing when the profile names none)."""
    parts = []
    if env.index_url:
        parts.append(b"index_url=" + env.index_url.encode())
    if env.constraints:
        parts.append(b"constraints=" + "\n".join(env.constraints).encode())
    return parts


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:12]


def env_image_tag(env: EnvSpec, ca_bundle: bytes) -> str:
    """One tag per (base, Dockerfile, Python, requirements.txt with index options, CA bundle, and the layer it
    is built over): every input of the image is in the tag, and tasks with the same inputs share it."""
    digest = _digest(dockerfile("env"), env.base_image.encode(), env.python.encode(), env.requirements.encode(),
                     ca_bundle, *index_parts(env))
    full = f"sweserve-env:{env.profile}-{digest}"
    return layered_env_tag(full, env_image_tag(env.over, ca_bundle)) if env.over is not None else full


def layered_env_tag(full_tag: str, common_tag: str) -> str:
    """The env image of a dependency set built over the repository's shared layer (both tags decide it)."""
    h = hashlib.sha256("\0".join([dockerfile("env-delta").decode(), full_tag, common_tag]).encode()).hexdigest()[:12]
    return f"{full_tag.rsplit('-', 1)[0]}-{h}"


def task_image_tag(spec: ImageSpec, env_tag: str) -> str:
    """The task's base commit on its env image, with the profile's install steps and the task's test env:
    changing any of them (or the task Dockerfile) makes another image instead of reusing a stale one."""
    env_hash = env_tag.rsplit("-", 1)[-1]
    parts = [dockerfile("task"), dockerfile("task", TREE_SCRIPT), "\0".join(spec.install).encode(),
             json.dumps(spec.test_env, sort_keys=True).encode()]
    if spec.leave_out:  # built without them: another image than a full one
        parts.append("\0".join(sorted(spec.leave_out)).encode())
    steps = _digest(*parts)[:8]
    lean = "-lean" if spec.history == "none" else ""
    return f"sweserve-task:{spec.task_id.lower()}-{spec.base_commit[:10]}-{env_hash}-{steps}{lean}"


@dataclass(frozen=True)
class ImageTags:
    """Every tag of one task's images."""

    env: str  # the env image the task image is built on (the thin layer over `shared` when there is one)
    shared: str | None  # the shared layer's env image
    task: str
    checked_out: str  # the task image with its tracked files in the image, for other harnesses


def image_tags(spec: ImageSpec, ca_bundle: bytes) -> ImageTags:
    """The one derivation of a task's image tags from its spec: what the builder builds and what export names."""
    full = env_image_tag(spec.env, ca_bundle)
    shared = env_image_tag(spec.shared, ca_bundle) if spec.shared is not None else None
    env = layered_env_tag(full, shared) if shared is not None else full
    task = task_image_tag(spec, env)
    return ImageTags(env=env, shared=shared, task=task, checked_out=checked_out_tag(task))


def _docker_build(client: docker.DockerClient, context: Path, dockerfile: str, tag: str, buildargs: dict, labels: dict,
                  network: str | None = None) -> None:
    """Build with the daemon's output streamed to the log a line at a time, with the time so far (a heartbeat
    when a step is silent); a failed build removes the layers it made."""
    lines: list[str] = []
    with BuildLog(f"build {tag}", log.info) as out:
        try:
            for chunk in client.api.build(path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs,
                                          labels=labels, rm=True, forcerm=True, network_mode=network, decode=True):
                if "error" in chunk or "errorDetail" in chunk:
                    out.line(str(chunk.get("error") or chunk["errorDetail"].get("message", "")))
                    _remove_layers(client, built_layers(lines))
                    raise InfraError("image_build", f"building {tag} failed: {' | '.join(out.tail)}")
                for line in str(chunk.get("stream", "")).splitlines():
                    if line.strip():
                        lines.append(line.strip())
                    out.line(line)
        except docker.errors.APIError as exc:
            raise InfraError("image_build", f"building {tag} failed: {exc.explanation or exc}") from None
    if not image_exists(client, tag):
        raise InfraError("image_build", f"building {tag} failed: {' | '.join(out.tail) or 'no image was produced'}")
    log.info("built %s in %s", tag, clock(time.monotonic() - out.start, hours=False))


def built_layers(log_lines: list[str]) -> list[str]:
    """Ids of the images a classic-builder build made: every step's, but the base's and cached steps'."""
    made, prev = [], ""
    for line in log_lines:
        line = line.strip()
        m = re.fullmatch(r"---> ([0-9a-f]{12,64})", line)
        if m and prev != "---> Using cache" and not re.match(r"Step \d+/\d+ : FROM\b", prev, re.IGNORECASE):
            made.append(m.group(1))
        if not line.startswith("---> Running in"):
            prev = line
    return made


def _remove_layers(client: docker.DockerClient, ids: list[str]) -> None:
    """Remove what a failed build left untagged, newest first; a layer another build now uses stays."""
    for image_id in reversed(ids):
        try:
            client.images.remove(image_id, noprune=False)
        except docker.errors.APIError:
            pass


def sparse_pattern(path: str) -> str:
    """A sparse-checkout line leaving out exactly this path (gitignore syntax, special characters escaped)."""
    escaped = "".join("\\" + ch if ch in "*?[]\\!# " else ch for ch in path)
    return f"!/{escaped}"


def export_repo_at(clone: Path, commit: str, dest: Path, history: str = "ancestors",
                   leave_out: Sequence[str] = ()) -> None:
    """A fresh repository at dest holding commit and its ancestors only: one branch, no other refs, no reflog.

    history="none" keeps the commit alone: a shallow repository (`.git/shallow` names it) whose HEAD is still
    `commit`, so diffs against the base commit work, but none of the repository's history is copied.

    leave_out: files of commit the clone cannot read (the task records them in `unreadable`). Their objects
    are not copied, and the repository is a sparse checkout without them: HEAD is still `commit`, the index
    keeps their entries (skip-worktree), so neither a checkout nor a submission's diff ever reads them.
    """
    def git(*args: str, input: bytes | None = None) -> bytes:
        try:
            return run_git(*args, repo=dest, input=input)
        except GitError as exc:
            raise InfraError("git", f"git {exc.subcommand} of {commit[:12]} from {clone} failed: "
                                    f"{reason(exc.stderr, exc.returncode)}") from None

    dest.mkdir(parents=True)
    git("init", "-q")
    if leave_out:
        _copy_objects_without(clone, commit, dest, history, set(leave_out), git)
    else:
        depth = ["--depth=1"] if history == "none" else []
        git("-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head", *depth,
            str(clone.resolve()), commit)
    git("update-ref", "refs/heads/main", commit)
    git("symbolic-ref", "HEAD", "refs/heads/main")
    if leave_out:
        git("config", "core.sparseCheckout", "true")
        (dest / ".git" / "info").mkdir(exist_ok=True)
        (dest / ".git" / "info" / "sparse-checkout").write_text(
            "/*\n" + "".join(sparse_pattern(p) + "\n" for p in sorted(leave_out)))
        git("read-tree", "--reset", "-u", "HEAD")
    else:
        git("reset", "-q", "--hard", commit)
        git("reflog", "expire", "--expire=now", "--all")
        git("gc", "-q", "--prune=now")
    (dest / ".git" / "ORIG_HEAD").unlink(missing_ok=True)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(REPO_EXCLUDES)


def _copy_objects_without(clone: Path, commit: str, dest: Path, history: str, leave_out: set[str], git) -> None:
    """Copy commit's objects (and its ancestors' with history "ancestors") from clone into dest as one pack,
    without the blobs of the left-out paths and any object the clone lacks."""
    source = ["-C", str(clone.resolve())]
    blobs = git(*source, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *sorted(leave_out)).decode(
        "utf-8", "replace")
    skip = {e.split("\t")[0].split()[2] for e in blobs.split("\0") if e.count(" ") >= 2 and "\t" in e}
    walk = ["--no-walk"] if history == "none" else []
    listed = git(*source, "rev-list", "--objects", "--missing=print", *walk, commit).decode("utf-8", "replace")
    ids = [ln.split(" ", 1)[0] for ln in listed.splitlines() if ln and not ln.startswith("?")]
    wanted = "".join(f"{i}\n" for i in ids if i not in skip).encode()
    pack = git(*source, "pack-objects", "-q", "--stdout", input=wanted)
    git("index-pack", "--stdin", input=pack)
    if history == "none":
        (dest / ".git" / "shallow").write_text(commit + "\n")


@contextmanager
def host_lock(tag: str) -> Iterator[None]:
    """Held while one process on this machine builds or pulls tag (Ray runs several worker processes per node)."""
    folder = Path(tempfile.gettempdir()) / "sweserve-image-locks"
    folder.mkdir(exist_ok=True)
    with open(folder / hashlib.sha256(tag.encode()).hexdigest()[:16], "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class ImageBuilder:
    """Builds missing layers on demand; one lock per tag (threads here, processes on this machine) so parallel
    workers build each image once.

    With a registry (``host:port``), a missing layer is first pulled from it, and every layer built here is
    pushed to it: the nodes of a cluster then build each layer once between them. Without one, each node builds
    what it lacks from the same recipe (the tags are the same everywhere) with its own cache.
    """

    client: docker.DockerClient
    ca_bundle: bytes
    registry: str | None = None
    build_network: str | None = None  # docker build --network, e.g. to reach a package index on this host
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def _lock(self, tag: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(tag, threading.Lock())
        with lock, host_lock(tag):
            yield

    def _present(self, tag: str) -> bool:
        """tag is here, or was pulled from the registry just now."""
        if image_exists(self.client, tag):
            return True
        if not self.registry:
            return False
        repo, version = f"{self.registry}/{tag}".rsplit(":", 1)
        try:
            self.client.images.pull(repo, tag=version)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            log.warning("cannot pull %s:%s (%s); building it here", repo, version, exc.explanation or exc)
            return False
        self.client.images.get(f"{repo}:{version}").tag(*tag.rsplit(":", 1))
        log.info("pulled %s from %s", tag, self.registry)
        return True

    def _publish(self, tag: str) -> None:
        """Push a layer just built, so other nodes pull it instead of building it again. A failed push is a
        warning: the image is built and used here; other nodes build it themselves."""
        if not self.registry:
            return
        repo, version = f"{self.registry}/{tag}".rsplit(":", 1)
        try:
            self.client.images.get(tag).tag(repo, version)
            for line in self.client.images.push(repo, tag=version, stream=True, decode=True):
                if "error" in line:
                    log.warning("cannot push %s:%s (%s); using it here only", repo, version, line["error"])
                    return
        except docker.errors.APIError as exc:
            log.warning("cannot push %s:%s (%s); using it here only", repo, version, exc.explanation or exc)
            return
        log.info("pushed %s to %s", tag, self.registry)

    def _build(self, context: Path, tag: str, buildargs: dict, labels: dict) -> None:
        _docker_build(self.client, context, "Dockerfile", tag, buildargs, labels, self.build_network)
        self._publish(tag)

    def base(self, tag: str) -> str:
        """The base image `tag`, built with debootstrap when it is a sweserve-base:<suite> image not here yet."""
        return self._base(tag)

    def _base(self, tag: str) -> str:
        with self._lock(tag):
            if not self._present(tag):
                if not tag.startswith("sweserve-base:"):
                    raise SweserveError(f"base image {tag} is not present and no registry has it: build or load it first")
                build_base_image(tag)
                self._publish(tag)
        return tag

    def env(self, env: EnvSpec, shared: EnvSpec | None = None) -> str:
        """The env image of `env`; with `shared` (the layer of what all the repository's tasks declare), a thin
        layer over the shared env image."""
        if env.over is not None:  # a layer that is itself thin over another
            return self.env(env.model_copy(update={"over": None}), env.over)
        full_tag = env_image_tag(env, self.ca_bundle)
        if shared is None:
            with self._lock(full_tag):
                if not self._present(full_tag):
                    self._build_env(env, full_tag, "env", {"BASE_IMAGE": self.base(env.base_image)})
            return full_tag
        common = self.env(shared)
        tag = layered_env_tag(full_tag, common)
        with self._lock(tag):
            if not self._present(tag):
                self._build_env(env, tag, "env-delta", {"COMMON_IMAGE": common})
        return tag

    def _build_env(self, env: EnvSpec, tag: str, layer: str, buildargs: dict) -> None:
        log.info("building env image %s", tag)
        for line in env.left_out:
            log.warning("left out of %s (cannot be installed in the sandbox build): %s", tag, line)
        with tempfile.TemporaryDirectory(prefix="sweserve-env-") as tmp:
            ctx = Path(tmp)
            (ctx / "Dockerfile").write_bytes(dockerfile(layer))
            (ctx / "ca-bundle.crt").write_bytes(self.ca_bundle)
            (ctx / "requirements.txt").write_text(env.requirements)
            (ctx / "constraints.txt").write_text("".join(f"{c}\n" for c in env.constraints))
            self._build(ctx, tag, {**buildargs, "PYTHON_MIN": env.python, "INDEX_URL": env.index_url or ""},
                        {"sweserve": "1", "sweserve.profile": env.profile})

    def task(self, spec: ImageSpec, clone: Path | None) -> str:
        """The task image of `spec` (its env image first), built from `clone` when it is not here yet."""
        env_tag = self.env(spec.env, spec.shared)
        tag = image_tags(spec, self.ca_bundle).task
        with self._lock(tag):
            if self._present(tag):
                return tag
            if clone is None:
                raise SweserveError(
                    f"task image for {spec.task_id} is not built and no clone of {spec.repo} is known: pass --repo-path"
                )
            log.info("building task image %s", tag)
            with tempfile.TemporaryDirectory(prefix="sweserve-task-") as tmp:
                ctx = Path(tmp)
                write_task_context(ctx, clone, spec.base_commit, spec.history, spec.leave_out)
                self._build(ctx, tag, {"ENV_IMAGE": env_tag, "INSTALL": " && ".join(spec.install)},
                            {"sweserve": "1", "sweserve.task": spec.task_id, "sweserve.base_commit": spec.base_commit})
        return tag

    def checked_out(self, task_image: str) -> str:
        """The task image with its tracked files in the image (images/checked-out/), for other harnesses."""
        return self._dockerfile_layer(checked_out_tag(task_image), "checked-out", {"TASK_IMAGE": task_image}, {})

    def agent(self, task_image: str, agent_name: str, install: list[str]) -> str:
        """The task image plus an agent's install steps (run with network at build time, never in the sandbox)."""
        h = hashlib.sha256("\0".join([task_image, *install]).encode()).hexdigest()[:12]
        return self._dockerfile_layer(f"sweserve-agent:{agent_name.lower()}-{h}", "agent",
                                      {"TASK_IMAGE": task_image, "INSTALL": " && ".join(f"( {c} )" for c in install)},
                                      {"sweserve.agent": agent_name})

    def _dockerfile_layer(self, tag: str, layer: str, buildargs: dict, labels: dict) -> str:
        """tag, built once (under the host lock) from the layer's Dockerfile alone unless it is present."""
        with self._lock(tag):
            if self._present(tag):
                return tag
            log.info("building %s image %s", layer, tag)
            with tempfile.TemporaryDirectory(prefix=f"sweserve-{layer}-") as tmp:
                ctx = Path(tmp)
                (ctx / "Dockerfile").write_bytes(dockerfile(layer))
                self._build(ctx, tag, buildargs, {"sweserve": "1", **labels})
        return tag

    def proxy(self, base: str = PROXY_BASE) -> str:
        """The egress proxy image (mitmproxy and sweserve's addon, see images/proxy/), built once per content."""
        files = {"Dockerfile": dockerfile("proxy"), "egress_addon.py": dockerfile("proxy", "egress_addon.py"),
                 "ca-bundle.crt": self.ca_bundle}
        h = hashlib.sha256(base.encode())
        for name, data in sorted(files.items()):
            h.update(hashlib.sha256(name.encode() + b"\0" + data).digest())
        tag = f"sweserve-proxy:{h.hexdigest()[:12]}"
        with self._lock(tag):
            if self._present(tag):
                return tag
            self._base(base)
            log.info("building egress proxy image %s", tag)
            with tempfile.TemporaryDirectory(prefix="sweserve-proxy-") as tmp:
                ctx = Path(tmp)
                for name, data in files.items():
                    (ctx / name).write_bytes(data)
                self._build(ctx, tag, {"BASE_IMAGE": base}, {"sweserve": "1"})
        return tag
