"""Pinned environments: requirements resolved as of the PR's date with uv, against a package index served
on 127.0.0.1 whose files carry upload times (PEP 700), and env/task image tags keyed on every input."""

import base64
import hashlib
import http.server
import json
import os
import socket
import threading
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tag_helpers import env_tag, task_tag

from sweserve.dataset.image_spec import env_requirements, image_spec
from sweserve.dataset.locking import LockError, installable, lock, requirements_text
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_bundle
from sweserve.models import EnvironmentLock

# name → [(version, upload time, requires)]
PACKAGES = {
    "tinypkg": [("1.0", "2023-01-01T00:00:00Z", []), ("2.0", "2024-06-01T00:00:00Z", [])],
    "tinydep": [("0.3", "2023-05-01T00:00:00Z", ["tinypkg"])],
    # uploaded minutes after the fixture repositories' first commits (2023-11-14T22:13:20Z + a minute a git call)
    "latepkg": [("1.0", "2023-11-14T23:00:00Z", [])],
}


def wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"__version__ = '{version}'\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for name_, text in files.items():
            z.writestr(name_, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name_},sha256={digest},{len(text)}")
        z.writestr(f"{dist}/RECORD", "\n".join(record + [f"{dist}/RECORD,,"]) + "\n")
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PEP 691 JSON simple index on 127.0.0.1 with upload times, as --index-url options."""
    root = tmp_path_factory.mktemp("index")
    listing = {}
    for name, versions in PACKAGES.items():
        files = []
        for version, uploaded, requires in versions:
            path = wheel(root, name, version, requires)
            files.append({"filename": path.name, "url": f"/{path.name}", "upload-time": uploaded,
                          "hashes": {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}})
        listing[name] = json.dumps({"meta": {"api-version": "1.1"}, "name": name, "files": files,
                                    "versions": [v for v, _, _ in versions]}).encode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            parts = self.path.strip("/").split("/")
            if parts[0] == "simple":
                body = listing.get(parts[1] if len(parts) > 1 else "")
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # uv may drop a connection once it has what it needs

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield ["--index-url", f"http://127.0.0.1:{server.server_address[1]}/simple"]
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def uv_cache(tmp_path, monkeypatch, request):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    if "index" in request.fixturenames or "closed_index" in request.fixturenames:
        monkeypatch.delenv("UV_OFFLINE", raising=False)  # conftest's: these tests name their own index


def at(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def test_lock_takes_what_the_index_had_at_the_date(index):
    assert lock(["tinypkg"], "3.11", at("2023-12-01"), index).requirements == ["tinypkg==1.0"]
    assert lock(["tinypkg"], "3.11", at("2025-01-01"), index).requirements == ["tinypkg==2.0"]
    pinned = lock(["tinydep", "dep @ git+https://github.com/x/dep.git"], "3.11", at("2023-12-01"), index)
    assert pinned.requirements == ["tinydep==0.3", "tinypkg==1.0"]
    assert pinned.left_out == ["dep @ git+https://github.com/x/dep.git: a version-control URL: the sandbox "
                               "build reaches only the package index"]
    with pytest.raises(LockError) as err:
        lock(["tinypkg>=3"], "3.11", at("2025-01-01"), index)
    assert "\n" not in str(err.value) and "tinypkg" in str(err.value)


def test_installable():
    keep, out = installable(["numpy>=1", "x @ https://example.com/x.whl", "git+https://github.com/a/b",
                             "./local", "y[extra] @ git+ssh://git@github.com/a/y.git", "jax[cpu]==0.4"])
    assert keep == ["numpy>=1", "jax[cpu]==0.4"] and len(out) == 4


PYPROJECT = '[project]\nname = "p"\nversion = "0"\ndependencies = [{deps}]\n'
CODE, TEST = "python/sgl_jax/srt/mem_cache/pool.py", "python/sgl_jax/test/test_pool.py"


def test_mined_tasks_are_locked_as_of_their_pr(make_repo, tmp_path, index, monkeypatch):
    profile = load_profile("sglang-jax").model_copy(update={
        "lock": True, "lock_when": "mine", "index_options": index, "env_packages": [],
        "dependency_files": ["python/pyproject.toml"], "dependency_extras": []})
    repo = make_repo()
    repo.commit("init", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg"'), CODE: "x = 0\n",
                         TEST: "def test_a(): pass\n"})
    # the PR itself adds a requirement: its environment must have it (it could never validate otherwise)
    repo.commit("Use tinydep (#1)", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg", "tinydep"'),
                                     CODE: "import tinydep\n", TEST: "def test_a(): assert 1\n"})
    repo.commit("Needs a git URL (#2)", {
        "python/pyproject.toml": PYPROJECT.format(deps='"tinypkg", "tinydep", "priv @ git+https://github.com/o/priv"'),
        CODE: "x = 2\n", TEST: "def test_a(): assert 2\n"})
    repo.commit("Needs what never existed (#3)", {
        "python/pyproject.toml": PYPROJECT.format(deps='"tinypkg>=9"'), CODE: "x = 3\n", TEST: "def test_a(): assert 3\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert len(report.written) == 3
    t1 = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-1").task
    assert t1.dependencies == ["tinydep", "tinypkg"]
    assert t1.lock.requirements == ["tinydep==0.3", "tinypkg==1.0"]  # 2023-11: before tinypkg 2.0
    assert t1.lock.resolved_at == t1.created_at and t1.lock.python == "3.13"  # trixie's Python
    t2 = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-2").task
    assert t2.lock.requirements == t1.lock.requirements and t2.lock.left_out
    t3 = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-3").task
    assert t3.lock is None
    notes = report.notes
    assert [n for n in notes if n.startswith("left out of the environment") and "priv @ git+https" in n]
    [failed] = [n for n in notes if "locking failed" in n]
    assert failed.startswith("sgl-project__sglang-jax-3: locking failed") and "\n" not in failed

    # tasks with the same pins share an env image; the pins, not the declarations, key it
    assert env_tag(profile, b"", t1.dependencies, t1.lock) == env_tag(profile, b"", t2.dependencies, t2.lock)
    assert env_tag(profile, b"", t1.dependencies, t1.lock) != env_tag(profile, b"", t1.dependencies)
    text, left_out = env_requirements(profile, t1.dependencies, t1.lock)
    assert text.splitlines() == [f"--index-url {index[1]}", "tinydep==0.3", "tinypkg==1.0"] and left_out == []

    # re-mining reuses the stored locks: no index needed
    monkeypatch.setenv("UV_OFFLINE", "1")
    again = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-1").task.lock == t1.lock
    assert "sgl-project__sglang-jax-1" in again.existing


def test_every_input_of_an_image_is_in_its_tag(make_repo, tmp_path):
    profile = load_profile("sglang-jax")
    repo = make_repo()
    repo.commit("init", {CODE: "x = 0\n", TEST: "def test_a(): pass\n"})
    repo.commit("Fix (#1)", {CODE: "x = 1\n", TEST: "def test_a(): assert 1\n"})
    mine(open_repo(repo.path), profile, tmp_path / "tasks")
    task = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-1").task
    env = env_tag(profile, b"", task.dependencies)
    # a changed install step must build another task image, not reuse the old one
    assert task_tag(task, env, ["pip install -e python"]) != task_tag(task, env, ["pip install -e 'python[cpu]'"])
    assert task_tag(task, env, []) != task_tag(task, env, ["true"])
    other_env = task.model_copy(update={"test": task.test.model_copy(update={"env": {"JAX_PLATFORMS": "tpu"}})})
    assert task_tag(task, env, []) != task_tag(other_env, env, [])
    # index options and the lock are inputs of the env image
    indexed = profile.model_copy(update={"index_options": ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]})
    assert env_tag(indexed, b"", task.dependencies) != env
    pins = EnvironmentLock(resolved_at=task.created_at, python="3.13", requirements=["pytest==8.3.4"])
    assert env_tag(profile, b"", task.dependencies, pins) != env
    # what the sandbox build cannot install is left out of requirements.txt and said so
    text, left_out = env_requirements(profile, ["six", "dep @ git+https://github.com/a/dep"])
    assert text == "pytest\nsix\n" and left_out[0].startswith("dep @ git+https://github.com/a/dep: a version-control URL")
    assert requirements_text(["a"], ["--index-url", "http://x/simple", "--no-index"]) == "--index-url http://x/simple\n--no-index\na\n"


def test_the_builder_asks_for_another_task_image_when_install_changes(make_repo, tmp_path):
    """Wired through ImageBuilder: with every image present, the tag it settles on still follows install."""
    from types import SimpleNamespace

    from sweserve.environment.images import ImageBuilder

    present = SimpleNamespace(images=SimpleNamespace(get=lambda tag: object()))
    builder = ImageBuilder(present, b"")
    profile = load_profile("sglang-jax")
    repo = make_repo()
    repo.commit("init", {CODE: "x = 0\n", TEST: "def test_a(): pass\n"})
    repo.commit("Fix (#1)", {CODE: "x = 1\n", TEST: "def test_a(): assert 1\n"})
    mine(open_repo(repo.path), profile, tmp_path / "tasks")
    task = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-1").task
    before = builder.task(image_spec(task, profile), None)
    after = builder.task(image_spec(task, profile.model_copy(update={"install": ["pip install -e python"]})), None)
    assert before != after and before.rsplit("-", 2)[0] == after.rsplit("-", 2)[0]


@pytest.fixture
def closed_index():
    """An index URL nothing listens at: the index is unreachable."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return ["--index-url", f"http://127.0.0.1:{port}/simple"]


def test_builtin_sglang_profiles_lock_by_default_and_an_unreachable_index_leaves_them_unpinned(
        make_repo, tmp_path, closed_index):
    assert load_profile("sglang").lock and load_profile("sglang-jax").lock
    assert not load_profile("sglang-demo").lock  # extends sglang; the demo stays offline
    profile = load_profile("sglang-jax").model_copy(update={"index_options": closed_index, "lock_when": "mine"})
    repo = make_repo()
    repo.commit("init", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg>=1"'), CODE: "x = 0\n",
                         TEST: "def test_a(): pass\n"})
    repo.commit("Fix the value of x so callers get one (#1)\n\nCallers read x and expect one; it was zero.",
                {CODE: "x = 1\n", TEST: "def test_a(): assert 1\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert report.written == ["sgl-project__sglang-jax-1"]
    [note] = [n for n in report.notes if "locking failed" in n]
    assert note.startswith("sgl-project__sglang-jax-1: locking failed, the env image installs the declared "
                           "requirements unpinned (asked again at the next build): ") and "\n" not in note
    task = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-1").task
    assert task.lock is None and "tinypkg>=1" in task.dependencies
    assert task.lock_pending  # an unreachable index is no answer: the first build asks again
    text, _ = env_requirements(profile, task.dependencies, task.lock)
    assert "tinypkg>=1" in text.splitlines()


# --- shared, cached locks (issue 18) ---

from sweserve.dataset.locking import Locker, epoch_end  # noqa: E402
from sweserve.models import Task, TestSpec  # noqa: E402


def _task(n: int, when: str, deps=("tinypkg",)) -> Task:
    return Task(task_id=f"o__r-{n}", repo="o/r", profile="p", pr_number=n, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="serving-api", created_at=at(when), dependencies=list(deps),
                test=TestSpec(files=["test_a.py"]))


class Resolver:
    """Stands in for uv: answers pins from the date, fails where told, and counts its runs."""

    def __init__(self, fail_before: datetime | None = None, transient: bool = False):
        self.calls: list[tuple] = []
        self.fail_before, self.transient = fail_before, transient

    def __call__(self, packages, python, as_of, index_options, platform="linux"):
        self.calls.append((tuple(packages), as_of))
        if self.transient:
            raise LockError("uv pip compile took more than 300s")
        if self.fail_before and as_of < self.fail_before:
            raise LockError("No solution found when resolving dependencies: tinypkg>=2 was not yet released")
        return EnvironmentLock(resolved_at=as_of, python=python, requirements=[f"{p}==1.{as_of.month}" for p in packages])


def test_epoch_end_is_the_last_second_of_the_week_month_or_quarter():
    when = at("2024-02-14T10:00:00")
    assert epoch_end(when, "pr") == when
    assert epoch_end(when, "week") == at("2024-02-18T23:59:59")  # that Sunday
    assert epoch_end(when, "month") == at("2024-02-29T23:59:59")  # a leap year
    assert epoch_end(when, "quarter") == at("2024-03-31T23:59:59")
    assert epoch_end(at("2024-12-31T23:59:59"), "quarter") == at("2024-12-31T23:59:59")


def test_tasks_with_the_same_requirements_share_one_lock_per_epoch(tmp_path):
    uv = Resolver()
    locker = Locker([], "3.11", [], "month", tmp_path / "locks", resolve=uv)
    tasks = [_task(1, "2024-01-03T00:00:00"), _task(2, "2024-01-20T00:00:00"), _task(3, "2024-01-28T00:00:00"),
             _task(4, "2024-02-02T00:00:00"), _task(5, "2024-02-05T00:00:00", deps=("tinypkg", "tinydep"))]
    locks = locker.lock_all(tasks, lambda t: False, newest=at("2024-02-10T00:00:00"))
    # January's three share one lock as of January's end; February's is capped at the newest commit mined
    assert locks["o__r-1"] == locks["o__r-2"] == locks["o__r-3"] and locks["o__r-1"].resolved_at == at("2024-01-31T23:59:59")
    assert locks["o__r-4"].resolved_at == at("2024-02-10T00:00:00") and locks["o__r-4"] != locks["o__r-1"]
    assert locks["o__r-5"].requirements != locks["o__r-4"].requirements  # other requirements: their own lock
    assert len(uv.calls) == 3 and locker.stats.resolved == 3 and locker.stats.shared == 5
    assert locks["o__r-1"].packages == ["tinypkg"]


def test_a_second_mine_resolves_nothing_and_a_pr_changing_its_dependencies_gets_its_own_lock(tmp_path):
    tasks = [_task(1, "2024-03-03T00:00:00"), _task(2, "2024-03-09T00:00:00", deps=("tinypkg", "tinydep"))]
    own = lambda t: t.task_id == "o__r-2"  # noqa: E731 - its PR edits pyproject.toml
    uv = Resolver()
    first = Locker([], "3.11", [], "month", tmp_path / "locks", resolve=uv).lock_all(tasks, own, at("2024-05-01"))
    assert first["o__r-2"].resolved_at == at("2024-03-09T00:00:00")  # as of its own merge
    assert first["o__r-1"].resolved_at == at("2024-03-31T23:59:59")
    again = Locker([], "3.11", [], "month", tmp_path / "locks", resolve=Resolver(transient=True))
    assert again.lock_all(tasks, own, at("2024-05-01")) == first  # the cache answers; uv is never asked
    assert again.stats.resolved == 0 and again.stats.cached == 2
    # the index options are part of the key: another index is asked again
    other = Locker([], "3.11", ["--index-url", "http://127.0.0.1:1/simple"], "month", tmp_path / "locks",
                   resolve=Resolver())
    other.lock_all(tasks, own, at("2024-05-01"))
    assert other.stats.resolved == 2


def test_a_failed_own_lock_falls_back_to_its_epochs_cutoff_then_to_unpinned(tmp_path):
    tasks = [_task(1, "2024-05-30T00:00:00", deps=("tinypkg>=2",)), _task(2, "2024-04-10T00:00:00")]
    uv = Resolver(fail_before=at("2024-06-01T00:00:00"))  # tinypkg 2 appeared on June 1st
    locker = Locker([], "3.11", [], "quarter", tmp_path / "locks", resolve=uv)
    locks = locker.lock_all(tasks, lambda t: t.task_id == "o__r-1", at("2024-07-01"))
    assert locks["o__r-1"].resolved_at == at("2024-06-30T23:59:59") and locker.stats.fallback == 1
    assert any(n.startswith("o__r-1: locking as of its merge failed") for n in locker.notes)
    assert locks["o__r-2"] is not None
    # a month epoch ends before June: nothing to fall back to; unpinned, with the one-line note
    uv = Resolver(fail_before=at("2024-06-01T00:00:00"))
    locker = Locker([], "3.11", [], "month", tmp_path / "locks2", resolve=uv)
    locks = locker.lock_all(tasks[:1], lambda t: True, at("2024-07-01"))
    assert locks["o__r-1"] is None and locker.stats.unpinned == 1 and locker.stats.fallback == 0
    # uv's final refusal is cached; a time-out is not
    again = Locker([], "3.11", [], "month", tmp_path / "locks2", resolve=Resolver(transient=True))
    assert again.lock_all(tasks[:1], lambda t: True, at("2024-07-01"))["o__r-1"] is None and again.stats.resolved == 0
    flaky = Locker([], "3.11", [], "month", tmp_path / "locks3", resolve=Resolver(transient=True))
    flaky.lock_all(tasks[1:], lambda t: False, at("2024-07-01"))
    assert not list((tmp_path / "locks3").glob("*.json"))


def test_distinct_locks_resolve_concurrently_within_the_bound(tmp_path):
    import time as _time

    running, peak = [0], [0]
    guard = threading.Lock()

    def slow(packages, python, as_of, index_options, platform="linux"):
        with guard:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        _time.sleep(0.2)
        with guard:
            running[0] -= 1
        return EnvironmentLock(resolved_at=as_of, python=python, requirements=list(packages))

    tasks = [_task(n, f"2024-{n:02d}-05T00:00:00") for n in range(1, 9)]
    started = _time.monotonic()
    Locker([], "3.11", [], "month", None, workers=3, resolve=slow).lock_all(tasks, lambda t: False, at("2025-01-01"))
    assert peak[0] == 3 and _time.monotonic() - started < 8 * 0.2


def test_re_mining_with_a_warm_lock_cache_needs_no_index(make_repo, tmp_path, index):
    profile = load_profile("sglang-jax").model_copy(update={
        "index_options": index, "env_packages": [], "dependency_files": ["python/pyproject.toml"],
        "dependency_extras": [], "lock_when": "mine"})
    repo = make_repo()
    repo.commit("init", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg"'), CODE: "x = 0\n",
                         TEST: "def test_a(): pass\n"})
    for n in (1, 2, 3):
        repo.commit(f"Fix x (#{n})", {CODE: f"x = {n}\n", TEST: f"def test_a(): assert {n}\n"})
    cache = tmp_path / "locks"
    cold = mine(open_repo(repo.path), profile, tmp_path / "tasks", lock_cache=cache)
    assert cold.locks.resolved == 1 and cold.locks.shared == 3  # one month, one set of requirements
    locks = {load_bundle(tmp_path / "tasks" / t).task.lock.model_dump_json() for t in cold.written}
    assert len(locks) == 1
    warm = mine(open_repo(repo.path), profile, tmp_path / "fresh-tasks", lock_cache=cache)  # a new tasks folder
    assert warm.locks.resolved == 0 and warm.locks.cached == 1
    assert {load_bundle(tmp_path / "fresh-tasks" / t).task.lock.model_dump_json() for t in warm.written} == locks


def test_locks_resolve_for_the_wheels_the_base_images_glibc_loads():
    """uv's plain 'linux' is manylinux_2_28: it refused libtpu's wheels for 28 of sglang-jax's 164 tasks."""
    from sweserve.dataset.locking import image_platform

    assert image_platform("sweserve-base:trixie") == "x86_64-manylinux_2_40"
    assert image_platform("sweserve-base:bookworm") == "x86_64-manylinux_2_36"
    assert image_platform("nvcr.io/nvidia/pytorch:24.05") == "linux"
    seen = []
    locker = Locker([], "3.13", [], "month", None, "x86_64-manylinux_2_40",
                    resolve=lambda p, py, when, idx, platform: seen.append(platform) or EnvironmentLock(
                        resolved_at=when, python=py, requirements=list(p)))
    locker.lock_all([_task(1, "2024-01-05T00:00:00")], lambda t: False, at("2024-02-01"))
    assert seen == ["x86_64-manylinux_2_40"]


# --- lazy locking: mine records the request, the first image build resolves it (issue 18) ---

import subprocess  # noqa: E402
import sys  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from sweserve.cli.common import make_project  # noqa: E402
from sweserve.dataset.locking import resolve_pending  # noqa: E402
from sweserve.dataset.taskstore import load_task, readable_tasks  # noqa: E402


def _lazy_profile(index_options):
    return load_profile("sglang-jax").model_copy(update={
        "index_options": index_options, "env_packages": [], "dependency_files": ["python/pyproject.toml"],
        "dependency_extras": [], "lock_when": "build"})


def _three_fixes(make_repo):
    repo = make_repo()
    repo.commit("init", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg"'), CODE: "x = 0\n",
                         TEST: "def test_a(): pass\n"})
    for n in (1, 2, 3):
        repo.commit(f"Fix x (#{n})", {CODE: f"x = {n}\n", TEST: f"def test_a(): assert {n}\n"})
    return repo


def test_lazy_mine_records_each_lock_request_and_resolves_nothing(make_repo, tmp_path, closed_index):
    """Lazy is the default: mine never asks the index (here, nothing listens there), fails nothing, and records
    what the first build will resolve: one shared request for the month's three fixes."""
    assert load_profile("sglang-jax").lock_when == "build"
    report = mine(open_repo(_three_fixes(make_repo).path), _lazy_profile(closed_index), tmp_path / "tasks",
                  lock_cache=tmp_path / "locks")
    assert report.locks.pending == 3 and report.locks.resolved == 0 and report.locks.unpinned == 0
    assert not [n for n in report.notes if "locking failed" in n] and not (tmp_path / "locks").exists()
    tasks = readable_tasks(tmp_path / "tasks")
    assert all(t.lock is None and t.lock_pending for t in tasks)
    [request] = {t.lock_request.model_dump_json() for t in tasks}
    first = tasks[0].lock_request
    assert first.packages == ["tinypkg"] and first.python == "3.13" and first.index_options == closed_index
    assert first.platform == "x86_64-manylinux_2_40" and first.fallback is None and len(first.key) == 64
    # eager resolves the same key: both share one cache
    eager = Locker([], "3.13", closed_index, "quarter", None, "x86_64-manylinux_2_40")
    [again] = eager.requests(tasks[:1], lambda t: False, max(t.created_at for t in tasks)).values()
    assert again.key == first.key


def test_the_first_build_resolves_once_for_every_task_with_the_key_and_re_mining_stays_warm(
        make_repo, tmp_path, index, monkeypatch):
    repo = _three_fixes(make_repo)
    tasks_dir, state = tmp_path / "tasks", tmp_path / "state"
    mine(open_repo(repo.path), _lazy_profile(index), tasks_dir, lock_cache=state / "locks")
    [one, *others] = sorted(readable_tasks(tasks_dir), key=lambda t: t.task_id)
    # what validate does for the task it builds: its lock, resolved into the cache and into task.json
    args = SimpleNamespace(tasks=str(tasks_dir), state_dir=str(state), repo_path=None)
    project = make_project(args, [one])
    assert one.lock is not None and one.lock.requirements == ["tinypkg==1.0"]
    assert (state / "locks" / f"{one.lock_request.key}.json").is_file()
    # the other tasks with the same key got the same answer, without another resolve
    for other in others:
        assert load_task(tasks_dir / other.task_id).lock == one.lock
    assert project.image_spec(load_task(tasks_dir / others[0].task_id)).env.requirements.endswith("tinypkg==1.0\n")
    # re-mined into the same folder with uv offline: every task is kept as it is, lock and all
    monkeypatch.setenv("UV_OFFLINE", "1")
    again = mine(open_repo(repo.path), _lazy_profile(index), tasks_dir, lock_cache=state / "locks")
    assert sorted(again.existing) == sorted(t.task_id for t in [one, *others]) and again.locks.pending == 0
    # into a fresh folder with the cache kept: the cache answers, nothing is pending
    fresh = mine(open_repo(repo.path), _lazy_profile(index), tmp_path / "fresh", lock_cache=state / "locks")
    assert fresh.locks.pending == 0 and fresh.locks.resolved == 0 and fresh.locks.cached == 1
    assert {t.lock.model_dump_json() for t in readable_tasks(tmp_path / "fresh")} == {one.lock.model_dump_json()}


def test_a_second_task_with_the_same_key_is_answered_by_the_cache(tmp_path):
    uv = Resolver()
    tasks = [_task(1, "2024-01-03T00:00:00"), _task(2, "2024-01-20T00:00:00")]
    requests = Locker([], "3.11", [], "month").requests(tasks, lambda t: False, at("2024-03-01"))
    for task in tasks:
        task.lock_request = requests[task.task_id]
    first = resolve_pending(tasks[:1], tmp_path / "locks", resolve=uv)  # built alone: its peer is not told
    assert first.stats.resolved == 1 and tasks[1].lock is None and tasks[1].lock_pending
    second = resolve_pending(tasks[1:], tmp_path / "locks", resolve=uv)
    assert second.stats.resolved == 0 and second.stats.cached == 1 and len(uv.calls) == 1
    assert tasks[1].lock == tasks[0].lock and not tasks[1].lock_pending


def test_a_lazy_lock_that_fails_takes_its_epochs_lock_then_is_left_unpinned_and_counted(tmp_path):
    tasks = [_task(1, "2024-05-30T00:00:00", deps=("tinypkg>=2",)), _task(2, "2024-05-30T00:00:00", deps=("x>=9",))]
    uv = Resolver(fail_before=at("2024-06-01T00:00:00"))
    requests = Locker([], "3.11", [], "quarter").requests(tasks, lambda t: True, at("2024-07-01"))
    for task in tasks:
        task.lock_request = requests[task.task_id]
    assert tasks[0].lock_request.fallback == at("2024-06-30T23:59:59")
    saved = []

    def fails_for_x(packages, python, as_of, index_options, platform="linux"):
        if "x>=9" in packages:
            raise LockError("No solution found when resolving dependencies: x>=9 was never released")
        return uv(packages, python, as_of, index_options, platform)

    locker = resolve_pending(tasks, tmp_path / "locks", save=saved.append, resolve=fails_for_x)
    assert locker.stats.fallback == 1 and locker.stats.unpinned == 1
    assert tasks[0].lock.resolved_at == at("2024-06-30T23:59:59")
    assert tasks[1].lock is None and tasks[1].lock_request.unpinned.startswith("No solution found")
    assert not tasks[1].lock_pending and len(saved) == 2  # settled: a later build does not ask again
    assert any(n.startswith("o__r-2: locking failed") for n in locker.notes)
    assert resolve_pending(tasks, tmp_path / "locks", resolve=fails_for_x).stats.tasks == 0
    # a time-out or an unreachable index is no answer: unpinned for this build, asked again at the next
    flaky = [_task(3, "2024-05-30T00:00:00")]
    flaky[0].lock_request = Locker([], "3.11", [], "quarter").requests(flaky, lambda t: False, at("2024-07-01"))["o__r-3"]
    locker = resolve_pending(flaky, tmp_path / "locks", resolve=Resolver(transient=True))
    assert locker.stats.unpinned == 1 and flaky[0].lock is None and flaky[0].lock_pending
    assert "asked again at the next build" in locker.notes[0]
    assert resolve_pending(flaky, tmp_path / "locks", resolve=Resolver()).stats.resolved == 1 and flaky[0].lock


def _cli(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_sweserve_locks_resolve_falls_back_then_unpins_and_says_so(make_repo, tmp_path, index):
    """End to end through the command line against the local index: one PR needs a package uploaded after its
    merge (its quarter's lock has it), one needs a version that never existed (unpinned)."""
    profile = _lazy_profile(index)
    profile_file = tmp_path / "jaxlike.json"
    profile_file.write_text(profile.model_dump_json(exclude={"name"}))
    repo = make_repo()
    repo.commit("init", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg"'), CODE: "x = 0\n",
                         TEST: "def test_a(): pass\n"})
    repo.commit("Use latepkg (#1)", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg", "latepkg"'),
                                     CODE: "x = 1\n", TEST: "def test_a(): assert 1\n"})
    repo.commit("Needs tinypkg 9 (#2)", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg>=9"'),
                                         CODE: "x = 2\n", TEST: "def test_a(): assert 2\n"})
    for _ in range(60):  # a minute a git call: the newest commit lands after latepkg's upload
        repo.git("status")
    repo.commit("Back to any tinypkg (#3)", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg"'),
                                              CODE: "x = 3\n", TEST: "def test_a(): assert 3\n"})
    common = ["--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state")]
    mined = _cli("mine", "--repo", str(repo.path), "--profile", str(profile_file), *common, cwd=tmp_path)
    assert mined.returncode == 0, mined.stderr
    assert "3 pending (resolved at first build)" in " ".join(mined.stdout.split())
    status = _cli("locks", "status", "--json", *common, cwd=tmp_path)
    assert json.loads(status.stdout) == {"locked": 0, "pending": 3, "pending_keys": 3, "unpinned": 0,
                                         "not_locked": 0}
    done = _cli("locks", "resolve", *common, cwd=tmp_path)
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stderr
    assert "1 fell back to the epoch's cutoff, 1 unpinned" in out and "sgl-project__sglang-jax-2: locking failed" in out
    t1 = load_task(tmp_path / "tasks" / "sgl-project__sglang-jax-1")
    assert "latepkg==1.0" in t1.lock.requirements and t1.lock.resolved_at > t1.created_at
    status = _cli("locks", "status", "--json", *common, cwd=tmp_path)
    assert json.loads(status.stdout) == {"locked": 2, "pending": 0, "pending_keys": 0, "unpinned": 1,
                                         "not_locked": 0}
    # a task folder copied elsewhere keeps its pins, and its request re-resolves to the same ones
    again = lock(t1.lock_request.packages, t1.lock_request.python, t1.lock_request.fallback,
                 t1.lock_request.index_options, platform=t1.lock_request.platform)
    assert again.requirements == t1.lock.requirements
    bad = _cli("locks", "resolve", "nope", *common, cwd=tmp_path)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_the_shared_layers_pending_lock_is_resolved_before_the_layer_is_chosen(make_repo, tmp_path, index):
    """Validating one task must not pick the shared layer from the few locks resolved so far: the most common
    pending lock is resolved first, so the layer is the same whichever tasks are built first."""
    repo = _three_fixes(make_repo)
    repo.commit("Use tinydep (#4)", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg", "tinydep"'),
                                     CODE: "x = 4\n", TEST: "def test_a(): assert 4\n"})
    tasks_dir, state = tmp_path / "tasks", tmp_path / "state"
    mine(open_repo(repo.path), _lazy_profile(index), tasks_dir, lock_cache=state / "locks")
    four = load_task(tasks_dir / "sgl-project__sglang-jax-4")
    project = make_project(SimpleNamespace(tasks=str(tasks_dir), state_dir=str(state), repo_path=None), [four])
    assert four.lock.requirements == ["tinydep==0.3", "tinypkg==1.0"]
    shared = load_task(tasks_dir / "sgl-project__sglang-jax-1").lock
    assert shared is not None and project.shared_deps == {four.profile: [shared.requirements]}
    assert project.image_spec(four).shared is not None  # a thin layer over the three fixes' lock


def test_validate_resolves_the_locks_of_the_tasks_it_builds_before_docker_is_asked(make_repo, tmp_path, index):
    """The wiring of `sweserve validate`: its tasks' pending locks are resolved (and recorded) before any image
    is built; Docker is made unreachable here, so the command stops right after, with one line."""
    profile_file = tmp_path / "jaxlike.json"
    profile_file.write_text(_lazy_profile(index).model_dump_json(exclude={"name"}))
    repo = _three_fixes(make_repo)
    common = ["--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state")]
    assert _cli("mine", "--repo", str(repo.path), "--profile", str(profile_file), *common, cwd=tmp_path).returncode == 0
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}"}
    done = subprocess.run([sys.executable, "-m", "sweserve.cli", "validate", "sgl-project__sglang-jax-3", *common],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0 and "Traceback" not in done.stderr + done.stdout
    assert "locks (resolved at first build): 3 tasks, 1 resolved" in " ".join(done.stdout.split())
    locked = [load_task(tmp_path / "tasks" / f"sgl-project__sglang-jax-{n}").lock for n in (1, 2, 3)]
    assert locked[0] is not None and locked[0].requirements == ["tinypkg==1.0"] and len({lk for lk in map(str, locked)}) == 1


def test_export_resolves_the_pending_locks_of_what_it_exports(make_repo, tmp_path, index):
    """An exported task names the image a build with its lock makes: its pending lock is resolved (and
    recorded) first, as validate and run do; before, the export tagged and built an unpinned image."""
    profile_file = tmp_path / "jaxlike.json"
    profile_file.write_text(_lazy_profile(index).model_dump_json(exclude={"name"}))
    repo = _three_fixes(make_repo)
    common = ["--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state")]
    assert _cli("mine", "--repo", str(repo.path), "--profile", str(profile_file), *common, cwd=tmp_path).returncode == 0
    done = _cli("export", "--format", "swebench", "--out", str(tmp_path / "out"), "--include-unvalidated",
                "sgl-project__sglang-jax-3", *common, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "locks (resolved at first build): 3 tasks, 1 resolved" in " ".join(done.stdout.split())
    task = load_task(tmp_path / "tasks" / "sgl-project__sglang-jax-3")
    assert task.lock is not None and task.lock.requirements == ["tinypkg==1.0"]
    [row] = [json.loads(line) for line in (tmp_path / "out" / "test.jsonl").read_text().splitlines()]
    project = make_project(SimpleNamespace(tasks=str(tmp_path / "tasks"), state_dir=str(tmp_path / "state"),
                                           repo_path=None, ca_bundle=None))
    from sweserve.environment.images import image_tags, read_ca_bundle
    assert row["image"] == image_tags(project.image_spec(task), read_ca_bundle(None)).checked_out
