"""A second `Sandbox` backend for tests: local processes in a scratch folder. NOT AN ISOLATION BOUNDARY.

It exists to prove the seam: the trial pipeline, the submission taker and the verifier run against it unchanged,
through the `Sandbox` protocol alone. A sandbox is a folder standing in for `/`: its `testbed/` is a clone of
the task's repository at its base commit, `sweserve/` the harness's own folder. Commands run as local `bash`
processes (in a process group of their own, killed at the time limit) with every absolute `/testbed` and
`/sweserve` in them (and in the harness's files and in environment values) pointing into that folder, and the
folder's path taken back out of what they print. The test interpreter (with pytest) is first on PATH as
`python`. A command can read and write anything the test process can: never run a candidate here.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

from sweserve.config_search import ConfigSearch
from sweserve.dataset.project import Project
from sweserve.environment.gpus import GpuPool
from sweserve.environment.host import HostSpec
from sweserve.environment.sandbox import WORKDIR, ExecResult, TreeTooLarge
from sweserve.errors import InfraError, LimitExceeded, SweserveError
from sweserve.evaluation.context import Context
from sweserve.models import ImageSpec

ROOTS = re.compile(r"(?<![\w./-])/(testbed|sweserve)(?=/|\b|$)")
SKIPPED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache"})
OUTPUT_TAIL_BYTES = 8 * 2**20


class LocalSandbox:
    """The `Sandbox` protocol on a scratch folder and local processes (see the module's docstring)."""

    test_user = None  # no privilege drop on the machine that runs the tests (nothing here isolates anyway)

    def __init__(self, root: Path, name: str = "local"):
        self.root = root
        self._name = name
        self._background: list[subprocess.Popen] = []
        self._running: list[subprocess.Popen] = []  # commands not yet ended
        self.execs: list[str] = []  # every command run, as given (for tests that look at what the trial did)

    @classmethod
    def of_repo(cls, repo: Path, commit: str, name: str = "local") -> "LocalSandbox":
        root = Path(tempfile.mkdtemp(prefix="sweserve-local-box-"))
        (root / "sweserve").mkdir()
        quiet = {"capture_output": True, "check": True}
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(repo), str(root / "testbed")], **quiet)
        subprocess.run(["git", "-C", str(root / "testbed"), "checkout", "-q", "--detach", commit], **quiet)
        return cls(root, name)

    # --- paths ---------------------------------------------------------------------------------------------
    def _text(self, text: str) -> str:
        return ROOTS.sub(lambda m: f"{self.root}/{m.group(1)}", text)

    def _path(self, path: str) -> Path:
        rel = PurePosixPath(path).relative_to("/") if path.startswith("/") else PurePosixPath(path)
        return self.root / rel

    def _back(self, text: str) -> str:
        return text.replace(str(self.root), "")

    # --- the protocol --------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return "127.0.0.1"  # the host's own loopback: nothing here is isolated

    def forward(self, port: int) -> str:
        return f"127.0.0.1:{port}"

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
        base = {"PATH": path, "HOME": str(self.root), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
        return {**base, **{k: self._text(v) for k, v in (env or {}).items()}}

    def exec(self, command: str, timeout: float, workdir: str = WORKDIR, env: dict[str, str] | None = None,
             user: str | None = None) -> ExecResult:
        return self.exec_stream(command, timeout, lambda chunk: None, workdir, env, user)

    def exec_stream(self, command: str, timeout: float, on_output: Callable[[bytes], None],
                    workdir: str = WORKDIR, env: dict[str, str] | None = None,
                    user: str | None = None) -> ExecResult:
        self.execs.append(command)
        started = time.monotonic()
        cwd = self._path(workdir)
        cwd.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(["bash", "-c", self._text(command)], cwd=cwd, env=self._env(env),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        timer = threading.Timer(max(1, int(timeout)), _kill_group, (proc,))
        timer.start()
        self._running.append(proc)
        buf, total = bytearray(), 0
        try:
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(65536):
                total += len(chunk)
                buf += chunk
                if len(buf) > 2 * OUTPUT_TAIL_BYTES:
                    del buf[:-OUTPUT_TAIL_BYTES]
                on_output(chunk)
            code = proc.wait()
        finally:
            timer.cancel()
            self._running.remove(proc)
        elapsed = time.monotonic() - started
        code = 137 if code < 0 else code
        text = self._back(bytes(buf[-OUTPUT_TAIL_BYTES:]).decode("utf-8", "replace"))
        return ExecResult(code, text, code == 137 and elapsed >= int(timeout) - 0.5, round(elapsed, 3),
                          truncated=total > OUTPUT_TAIL_BYTES, output_bytes=total)

    def start_background(self, argv: list[str], workdir: str = WORKDIR) -> None:
        self._background.append(subprocess.Popen([self._text(a) for a in argv], cwd=self._path(workdir),
                                                 env=self._env(None), start_new_session=True,
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def interactive_argv(self, shell: str, tty: bool) -> list[str]:
        return ["bash", "-c", f"cd {self.root}/testbed && {self._text(shell)}"]

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)

    def read_file(self, path: str, max_bytes: int = 16 * 2**20) -> bytes | None:
        target = self._path(path)
        if target.is_symlink() or not target.is_file():
            return None
        if target.stat().st_size > max_bytes:
            raise LimitExceeded(f"{path} in the sandbox is over the {max_bytes / 2**20:g} MB limit")
        return target.read_bytes()

    def copy_tree_out(self, path: str, max_bytes: int, prefix: str = "") -> IO[bytes]:
        top = self._path(path)
        out = tempfile.SpooledTemporaryFile(max_size=64 << 20)
        total = 0
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
                for name in dirnames + sorted(filenames):
                    full = Path(dirpath) / name
                    rel = full.relative_to(top).as_posix()
                    info = tar.gettarinfo(str(full), prefix + rel)
                    if not (info.isdir() or info.isreg() or info.issym()):
                        continue
                    info.uid = info.gid = 0
                    info.uname = info.gname = "root"
                    if info.isreg():
                        total += info.size
                        if total > max_bytes:
                            raise TreeTooLarge(f"the working tree is over {max_bytes >> 20} MiB")
                        with open(full, "rb") as fh:
                            tar.addfile(info, fh)
                    else:
                        tar.addfile(info)
        out.seek(0)
        return out

    def copy_tree_in(self, dest: str, tar: bytes | IO[bytes]) -> None:
        fileobj = io.BytesIO(tar) if isinstance(tar, bytes) else tar
        target = self._path(dest)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=fileobj) as archive:
            for member in archive:
                where = (target / member.name).resolve()
                if not str(where).startswith(str(self.root.resolve())):
                    raise InfraError("sandbox", f"{member.name} leaves the sandbox")
                data = archive.extractfile(member).read() if member.isreg() else None
                harness = where.is_relative_to(self.root.resolve() / "sweserve" / "harness")
                if data is not None and harness:  # the harness's scripts and config name /testbed and /sweserve
                    data = self._text(data.decode("utf-8")).encode("utf-8")
                if data is not None:
                    where.parent.mkdir(parents=True, exist_ok=True)
                    where.unlink(missing_ok=True)
                    where.write_bytes(data)
                    where.chmod(member.mode & 0o777)
                elif member.isdir():
                    where.mkdir(parents=True, exist_ok=True)
                elif member.issym():
                    where.parent.mkdir(parents=True, exist_ok=True)
                    where.unlink(missing_ok=True)
                    where.symlink_to(member.linkname)

    def attach_egress(self, allow: list[str], closed_book: bool, audit_path: Path | None, *,
                      models=()) -> AbstractContextManager["LocalSandbox"]:
        if allow:
            raise InfraError("network", "the local test backend has no egress proxy")
        return _itself(self)

    def kill(self) -> None:
        """Every process group this sandbox started (a process that left its group is out of reach: nothing
        here isolates); its files stay."""
        for proc in self._background + self._running:
            _kill_group(proc)

    def remove(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "LocalSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


@contextmanager
def _itself(box: LocalSandbox) -> Iterator[LocalSandbox]:
    yield box


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LocalImages:
    """Images of the local backend: a name for (repository, commit); an agent's install is not supported."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[Path, str]] = {}

    def add(self, name: str, repo: Path, commit: str) -> str:
        self.known[name] = (repo, commit)
        return name

    def agent(self, task_image: str, agent_name: str, install: list[str]) -> str:
        if install:
            raise InfraError("image_build", "the local test backend installs no agents")
        return task_image

    def checked_out(self, task_image: str) -> str:
        return task_image  # a local sandbox's tree is always checked out


class LocalHost:
    """The `Host` protocol on local processes: images (a clone at a commit), GPUs (none unless told), sandboxes.
    NOT ISOLATED. `image_step`, when given, replaces the image step (tests script its failures with it)."""

    def __init__(self, run_id: str = "run1", host_gpus: list[str] | None = None,
                 image_step: Callable[[ImageSpec], str] | None = None):
        self.run_id = run_id
        self.host_gpus = list(host_gpus or [])
        self.assigned_gpus: list[str] | None = None
        self.gpu_pool = GpuPool(self.host_gpus)
        self.builder = LocalImages()
        self.image_step = image_step
        self.sandboxes: list[LocalSandbox] = []  # every sandbox handed out, with its role
        self.roles: list[str] = []
        self._cancelled = threading.Event()

    def task_image(self, spec: ImageSpec, clone: Path | None) -> str:
        if self.image_step is not None:
            return self.image_step(spec)
        if clone is None:
            raise SweserveError(f"task image for {spec.task_id} is not built and no clone of {spec.repo} is known")
        return self.builder.add(f"local:{spec.task_id}", clone, spec.base_commit)

    def spec(self) -> HostSpec:
        return HostSpec(run_id=self.run_id, assigned_gpus=self.assigned_gpus)

    def sandbox(self, image: str, task_id: str, role: str, resources, gpu_ids: list[str],
                offline: bool = False) -> LocalSandbox:
        if self._cancelled.is_set():
            raise InfraError("sandbox", "run cancelled")
        if image not in self.builder.known:
            raise InfraError("docker", f"no such image: {image}")
        repo, commit = self.builder.known[image]
        box = LocalSandbox.of_repo(repo, commit, name=f"{task_id}-{role}-{len(self.sandboxes)}")
        self.sandboxes.append(box)
        self.roles.append(role)
        return box

    def cancel(self) -> None:
        self._cancelled.set()

    def discard(self, box: LocalSandbox) -> None:
        box.remove()

    def settle(self) -> None:
        pass

    def close(self) -> None:
        for box in self.sandboxes:
            box.remove()

    def __enter__(self) -> "LocalHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def local_context(state_dir: Path, image_step: Callable[[ImageSpec], str] | None = None, host_gpus=(),
                  search: ConfigSearch | None = None, repo_path: Path | None = None, run_id: str = "run1") -> Context:
    """A Context whose host is a LocalHost: the project's configuration as in production, the machine local."""
    project = Project(state_dir, search or ConfigSearch.for_project(state_dir), repo_path)
    return Context(LocalHost(run_id, list(host_gpus), image_step), project)


def diff_of(repo, commit: str, path: str, text: str) -> str:
    """The patch that turns `path` at `commit` into `text` in a test's GitRepo (written by git, as mining writes
    one; the repository left as it was)."""
    repo.git("checkout", "-q", commit)
    repo.write({path: text})
    repo.git("add", "-A")
    patch = repo.git("diff", "--cached", "--binary")
    repo.git("reset", "-q", "--hard")
    repo.git("clean", "-qfd")
    return patch + "\n"


def local_task(tmp_path: Path, repo, slug: str, base: str, test_file: str, test_paths: list[str]):
    """A one-test-file task of the fixture repository `repo` at `base` (its id `o__<slug>-1`), a profile
    `local` for it under tmp_path/config, and a Context over a LocalHost with that configuration: (task,
    context). The caller closes the context."""
    import json

    from sweserve.models import Resources, Task, TestSpec

    (tmp_path / "config" / "profiles").mkdir(parents=True, exist_ok=True)
    (tmp_path / "config" / "profiles" / "local.json").write_text(json.dumps(
        {"repo": f"o/{slug}", "test_paths": test_paths, "env_packages": [],
         "family_rules": [{"family": "serving-api", "paths": ["*"]}]}))
    task = Task(task_id=f"o__{slug}-1", repo=f"o/{slug}", profile="local", pr_number=1, title="t", base_commit=base,
                merge_commit=base, family="serving-api", created_at="2026-01-01T00:00:00Z",
                resources=Resources(test_timeout_s=120), test=TestSpec(files=[test_file]))
    return task, local_context(tmp_path / "state", search=ConfigSearch(tmp_path / "config"), repo_path=repo.path)
