"""Building the image layers: base (debootstrap | docker import), env per dependency set, task per task.

The Dockerfiles are package data (`environment/dockerfiles/`), read with importlib.resources.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import docker
import docker.errors

from sweserve.dataset.gitio import last_line
from sweserve.dataset.locking import installable, packages_for, requirements_text
from sweserve.dataset.profiles import RepoProfile
from sweserve.errors import InfraError, SweserveError
from sweserve.models import EnvironmentLock, Task

log = logging.getLogger(__name__)
BASE_PACKAGES = ["python3", "python3-venv", "git", "ca-certificates", "patch", "procps"]
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PROXY_BASE = "sweserve-base:bookworm"  # Python 3.11: mitmproxy 11.0 is the last release for it
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


TREE_SCRIPT = "sweserve-tree"  # checks a task image's tracked files out when its container starts (task/)


def dockerfile(layer: str, name: str = "Dockerfile") -> bytes:
    """The Dockerfile (or another build file) of one layer (env, task, agent, proxy), from the installed package."""
    return resources.files("sweserve.environment").joinpath("dockerfiles", layer, name).read_bytes()


def checked_out_tag(task_image: str) -> str:
    """The tag of a task image's checked-out variant (the task tag already hashes all it is made of)."""
    digest = hashlib.sha256(dockerfile("checked-out")).hexdigest()[:6]
    return f"{task_image}-tree{digest}"


def write_task_context(dest: Path, clone: Path, commit: str, history: str, leave_out: list[str] = ()) -> None:
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
            for line in proc.stdout:
                out.line(line)
            proc.wait()
        if proc.returncode != 0:
            raise InfraError("image_build", f"debootstrap {suite} failed: {' | '.join(list(out.tail)[-3:])}")
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        log.info("docker import → %s", tag)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
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


def env_packages(profile: RepoProfile, dependencies: list[str]) -> list[str]:
    return packages_for(profile.env_packages, list(dependencies))


def env_requirements(profile: RepoProfile, dependencies: list[str] = (), lock: EnvironmentLock | None = None
                     ) -> tuple[str, list[str]]:
    """The env image's requirements.txt (index options, then the task's pins or its declared requirements)
    and the declared requirements left out because the sandbox build cannot install them."""
    if lock is not None:
        return requirements_text(lock.requirements, profile.index_options), list(lock.left_out)
    keep, left_out = installable(env_packages(profile, list(dependencies)))
    return requirements_text(keep, profile.index_options), left_out


def index_parts(profile: RepoProfile) -> list[bytes]:
    """What of the package index an env image depends on (nothing when the profile names none)."""
    parts = []
    if profile.index_url:
        parts.append(b"index_url=" + profile.index_url.encode())
    if profile.constraints:
        parts.append(b"constraints=" + "\n".join(profile.constraints).encode())
    return parts


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:12]


def env_image_tag(profile: RepoProfile, ca_bundle: bytes, dependencies: list[str] = (),
                  lock: EnvironmentLock | None = None) -> str:
    """One tag per (base, Dockerfile, Python, requirements.txt with index options, CA bundle): every input of
    the image is in the tag, and tasks with the same inputs share it."""
    requirements, _ = env_requirements(profile, dependencies, lock)
    digest = _digest(dockerfile("env"), profile.base_image.encode(), profile.python.encode(), requirements.encode(),
                     ca_bundle, *index_parts(profile))
    return f"sweserve-env:{profile.name}-{digest}"


def shared_dependencies(tasks: list[Task]) -> dict[str, list[str]]:
    """Per profile, the dependencies every one of its tasks declares (profiles with one dependency set: none)."""
    sets: dict[str, list[set[str]]] = {}
    for task in tasks:
        sets.setdefault(task.profile, []).append(set(task.dependencies))
    return {profile: sorted(set.intersection(*deps)) for profile, deps in sets.items()
            if len({frozenset(d) for d in deps}) > 1 and set.intersection(*deps)}


def layered_env_tag(full_tag: str, common_tag: str) -> str:
    """The env image of a dependency set built over the repository's shared layer (both tags decide it)."""
    h = hashlib.sha256("\0".join([dockerfile("env-delta").decode(), full_tag, common_tag]).encode()).hexdigest()[:12]
    return f"{full_tag.rsplit('-', 1)[0]}-{h}"


def task_image_tag(task: Task, env_tag: str, install: list[str] = (), history: str = "ancestors") -> str:
    """The task's base commit on its env image, with the profile's install steps and the task's test env:
    changing any of them (or the task Dockerfile) makes another image instead of reusing a stale one."""
    env_hash = env_tag.rsplit("-", 1)[-1]
    parts = [dockerfile("task"), dockerfile("task", TREE_SCRIPT), "\0".join(install).encode(),
             json.dumps(task.test.env, sort_keys=True).encode()]
    unreadable = getattr(task, "unreadable", None)
    if unreadable:  # built without them: another image than a full one
        parts.append("\0".join(sorted(unreadable)).encode())
    steps = _digest(*parts)[:8]
    lean = "-lean" if history == "none" else ""
    return f"sweserve-task:{task.task_id.lower()}-{task.base_commit[:10]}-{env_hash}-{steps}{lean}"


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
    log.info("built %s in %s", tag, _clock(time.monotonic() - out.start))


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


def git_subcommand(args) -> str:
    """The git command in an argument list: `fetch` in `-c k=v fetch -q …`."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return "git"


def git_message(stderr: str, returncode: int) -> str:
    """git's own reason: the first fatal line (a remote's too: a corrupt object in the clone), else its last
    error line, not the generic last line ("aborting due to possible repository corruption …")."""
    lines = [ln.strip().removeprefix("remote:").strip() for ln in stderr.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith("fatal:")]
    if fatal:
        return fatal[0]
    return last_line("\n".join(lines), f"exit code {returncode}")


def sparse_pattern(path: str) -> str:
    """A sparse-checkout line leaving out exactly this path (gitignore syntax, special characters escaped)."""
    escaped = "".join("\\" + ch if ch in "*?[]\\!# " else ch for ch in path)
    return f"!/{escaped}"


def export_repo_at(clone: Path, commit: str, dest: Path, history: str = "ancestors",
                   leave_out: list[str] = ()) -> None:
    """A fresh repository at dest holding commit and its ancestors only: one branch, no other refs, no reflog.

    history="none" keeps the commit alone: a shallow repository (`.git/shallow` names it) whose HEAD is still
    `commit`, so diffs against the base commit work, but none of the repository's history is copied.

    leave_out: files of commit the clone cannot read (the task records them in `unreadable`). Their objects
    are not copied, and the repository is a sparse checkout without them: HEAD is still `commit`, the index
    keeps their entries (skip-worktree), so neither a checkout nor a submission's diff ever reads them.
    """
    def git(*args: str, cwd: Path = dest, input: bytes | None = None) -> bytes:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, input=input)
        if proc.returncode != 0:
            raise InfraError("git", f"git {git_subcommand(args)} of {commit[:12]} from {clone} failed: "
                                        f"{git_message(proc.stderr.decode('utf-8', 'replace'), proc.returncode)}")
        return proc.stdout

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

    def base(self, profile: RepoProfile) -> str:
        return self._base(profile.base_image)

    def _base(self, tag: str) -> str:
        with self._lock(tag):
            if not self._present(tag):
                if not tag.startswith("sweserve-base:"):
                    raise SweserveError(f"base image {tag} is not present and no registry has it: build or load it first")
                build_base_image(tag)
                self._publish(tag)
        return tag

    def env(self, profile: RepoProfile, dependencies: list[str] = (), lock: EnvironmentLock | None = None,
            shared: list[str] = ()) -> str:
        """The env image of a dependency set (or of a task's pinned lock); with `shared` (what all the
        repository's tasks declare) and no lock, a thin layer over the shared env image of `shared`."""
        dependencies = list(dependencies)
        shared = [d for d in shared if d in dependencies] if lock is None else []
        full_tag = env_image_tag(profile, self.ca_bundle, dependencies, lock)
        if not shared or set(shared) == set(dependencies):
            with self._lock(full_tag):
                if not self._present(full_tag):
                    self._build_env(profile, dependencies, lock, full_tag, "env", {"BASE_IMAGE": self.base(profile)})
            return full_tag
        common = self.env(profile, shared)
        tag = layered_env_tag(full_tag, common)
        with self._lock(tag):
            if not self._present(tag):
                self._build_env(profile, dependencies, None, tag, "env-delta", {"COMMON_IMAGE": common})
        return tag

    def _build_env(self, profile: RepoProfile, dependencies: list[str], lock: EnvironmentLock | None, tag: str,
                   layer: str, buildargs: dict) -> None:
        requirements, left_out = env_requirements(profile, dependencies, lock)
        log.info("building env image %s", tag)
        for line in left_out:
            log.warning("left out of %s (cannot be installed in the sandbox build): %s", tag, line)
        with tempfile.TemporaryDirectory(prefix="sweserve-env-") as tmp:
            ctx = Path(tmp)
            (ctx / "Dockerfile").write_bytes(dockerfile(layer))
            (ctx / "ca-bundle.crt").write_bytes(self.ca_bundle)
            (ctx / "requirements.txt").write_text(requirements)
            (ctx / "constraints.txt").write_text("".join(f"{c}\n" for c in profile.constraints))
            self._build(ctx, tag, {**buildargs, "PYTHON_MIN": profile.python, "INDEX_URL": profile.index_url or ""},
                        {"sweserve": "1", "sweserve.profile": profile.name})

    def task(self, task: Task, profile: RepoProfile, clone: Path | None, shared: list[str] = ()) -> str:
        env_tag = self.env(profile, task.dependencies, task.lock, shared)
        tag = task_image_tag(task, env_tag, profile.install, profile.history)
        with self._lock(tag):
            if self._present(tag):
                return tag
            if clone is None:
                raise SweserveError(
                    f"task image for {task.task_id} is not built and no clone of {task.repo} is known: pass --repo-path"
                )
            log.info("building task image %s", tag)
            with tempfile.TemporaryDirectory(prefix="sweserve-task-") as tmp:
                ctx = Path(tmp)
                write_task_context(ctx, clone, task.base_commit, profile.history, getattr(task, "unreadable", []))
                self._build(ctx, tag, {"ENV_IMAGE": env_tag, "INSTALL": " && ".join(profile.install)},
                            {"sweserve": "1", "sweserve.task": task.task_id, "sweserve.base_commit": task.base_commit})
        return tag

    def checked_out(self, task_image: str) -> str:
        """The task image with its tracked files in the image (dockerfiles/checked-out/), for other harnesses."""
        tag = checked_out_tag(task_image)
        with self._lock(tag):
            if self._present(tag):
                return tag
            log.info("building checked-out image %s", tag)
            with tempfile.TemporaryDirectory(prefix="sweserve-checked-out-") as tmp:
                ctx = Path(tmp)
                (ctx / "Dockerfile").write_bytes(dockerfile("checked-out"))
                self._build(ctx, tag, {"TASK_IMAGE": task_image}, {"sweserve": "1"})
        return tag

    def agent(self, task_image: str, agent_name: str, install: list[str]) -> str:
        """The task image plus an agent's install steps (run with network at build time, never in the sandbox)."""
        h = hashlib.sha256("\0".join([task_image, *install]).encode()).hexdigest()[:12]
        tag = f"sweserve-agent:{agent_name.lower()}-{h}"
        with self._lock(tag):
            if self._present(tag):
                return tag
            log.info("building agent image %s", tag)
            with tempfile.TemporaryDirectory(prefix="sweserve-agent-") as tmp:
                ctx = Path(tmp)
                (ctx / "Dockerfile").write_bytes(dockerfile("agent"))
                self._build(ctx, tag, {"TASK_IMAGE": task_image, "INSTALL": " && ".join(f"( {c} )" for c in install)},
                            {"sweserve": "1", "sweserve.agent": agent_name})
        return tag

    def proxy(self, base: str = PROXY_BASE) -> str:
        """The egress proxy image (mitmproxy and sweserve's addon, see dockerfiles/proxy/), built once per content."""
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
