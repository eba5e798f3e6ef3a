"""Pinned environments: requirements resolved as of the PR's date with uv, against a package index served
on 127.0.0.1 whose files carry upload times (PEP 700), and env/task image tags keyed on every input."""

import base64
import hashlib
import http.server
import json
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


def test_mined_tasks_are_locked_as_of_their_pr(make_repo, tmp_path, index):
    profile = load_profile("sglang-jax").model_copy(update={
        "lock": True, "index_options": index, "env_packages": [],
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
    offline = profile.model_copy(update={"index_options": ["--offline"]})
    again = mine(open_repo(repo.path), offline, tmp_path / "tasks")
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
    profile = load_profile("sglang-jax").model_copy(update={"index_options": closed_index})
    repo = make_repo()
    repo.commit("init", {"python/pyproject.toml": PYPROJECT.format(deps='"tinypkg>=1"'), CODE: "x = 0\n",
                         TEST: "def test_a(): pass\n"})
    repo.commit("Fix the value of x so callers get one (#1)\n\nCallers read x and expect one; it was zero.",
                {CODE: "x = 1\n", TEST: "def test_a(): assert 1\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert report.written == ["sgl-project__sglang-jax-1"]
    [note] = [n for n in report.notes if "locking failed" in n]
    assert note.startswith("sgl-project__sglang-jax-1: locking failed, the env image installs the declared "
                           "requirements unpinned: ") and "\n" not in note
    task = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-jax-1").task
    assert task.lock is None and "tinypkg>=1" in task.dependencies
    text, _ = env_requirements(profile, task.dependencies, task.lock)
    assert "tinypkg>=1" in text.splitlines()
