import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


class GitRepo:
    """A real git repository built by a test, with deterministic commits."""

    def __init__(self, path: Path):
        self.path = path
        self.step = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self.step += 1
        date = f"{1_700_000_000 + self.step * 60} +0000"
        env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_AUTHOR_DATE": date,
               "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_COMMITTER_DATE": date,
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        return subprocess.run(["git", *args], cwd=self.path, env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def write(self, files: dict[str, str | bytes | None]) -> None:
        for rel, content in files.items():
            p = self.path / rel
            if content is None:
                p.unlink()
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content)

    def commit(self, message: str, files: dict | None = None) -> str:
        if files:
            self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture(autouse=True)
def no_package_index(tmp_path_factory, monkeypatch):
    """The built-in sglang profiles lock requirements while mining: in tests uv stays offline with an empty
    cache, so such a lock fails at once (a one-line note, requirements unpinned) and never reaches PyPI.
    tests/test_locking.py serves its own index and lifts this."""
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "uv-cache-offline"))


@pytest.fixture
def make_repo(tmp_path):
    def make(name="repo"):
        return GitRepo(tmp_path / name)
    return make


def _docker_ok() -> str | None:
    if shutil.which("docker") is None:
        return "docker CLI not installed"
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no usable daemon
        return f"Docker daemon not reachable: {exc.__class__.__name__}"
    return None


@pytest.fixture(scope="session")
def docker_client():
    why = _docker_ok()
    if why:
        if os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"SWESERVE_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(why)
    import docker

    return docker.from_env(timeout=600)


@dataclass
class Demo:
    root: Path
    repo: Path
    tasks: Path
    ctx: object
    outcomes: list

    def bundle(self, task_id):
        from sweserve.dataset.taskstore import load_bundle

        return load_bundle(self.tasks / task_id)


@pytest.fixture(scope="session")
def demo(docker_client, tmp_path_factory):
    """The demo repository mined and validated once per session, with a Context to run it."""
    from sweserve.dataset.lint import lint_task
    from sweserve.dataset.mining import mine, open_repo
    from sweserve.dataset.profiles import load_profile
    from sweserve.dataset.taskstore import load_all
    from sweserve.demo.fixture import PROFILE, build_demo_repo
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.validation import validate_all

    root = tmp_path_factory.mktemp("demo")
    repo = build_demo_repo(root / "repo")
    tasks = root / "tasks"
    mine(open_repo(repo), load_profile(PROFILE), tasks)
    ctx = Context.create(root / "state", repo_path=repo)
    outcomes = sorted(validate_all(ctx, tasks, load_all(tasks), runs=2), key=lambda o: o.task_id)
    for o in outcomes:  # as `sweserve validate` does: lint records the quality readiness needs
        lint_task(tasks / o.task_id, repo, write=True)
    yield Demo(root, repo, tasks, ctx, outcomes)
    ctx.close()
