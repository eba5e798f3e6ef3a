from tag_helpers import env_tag

from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.requirements import dependency_set
from sweserve.dataset.taskstore import load_all

PYPROJECT = '''[project]
name = "pkg"
dependencies = ["numpy~=2.2", "six   >=1.16"]
[project.optional-dependencies]
cpu = ["jax[cpu]==0.10.2"]
gpu = ["jax[cuda12]==0.10.2"]
'''


def test_dependency_set_reads_files_at_the_commit(make_repo):
    repo = make_repo()
    first = repo.commit("init", {"python/pyproject.toml": PYPROJECT, "python/requirements.txt": "# pins\nrich==13 # ui\n-e .\n"})
    second = repo.commit("bump", {"python/pyproject.toml": PYPROJECT.replace("numpy~=2.2", "numpy~=2.3")})
    g = open_repo(repo.path)
    files = ["python/pyproject.toml", "python/requirements.txt", "missing.txt"]
    assert dependency_set(g, first, files, ["cpu"]) == ["jax[cpu]==0.10.2", "numpy~=2.2", "rich==13", "six >=1.16"]
    assert dependency_set(g, second, files, [])[0] == "numpy~=2.3"
    assert dependency_set(g, first, ["nope.toml"], []) == []


def test_same_dependencies_share_one_env_image(make_repo, tmp_path):
    profile = load_profile("sglang-jax")
    repo = make_repo()
    code, test = "python/sgl_jax/srt/mem_cache/pool.py", "python/sgl_jax/test/test_pool.py"
    repo.commit("init", {"python/pyproject.toml": PYPROJECT, code: "x = 0\n", test: "def test_a(): pass\n"})
    repo.commit("Fix A (#1)", {code: "x = 1\n", test: "def test_a(): assert 1\n"})
    repo.commit("Fix B (#2)", {code: "x = 2\n", test: "def test_a(): assert 2\n"})
    repo.commit("Bump numpy", {"python/pyproject.toml": PYPROJECT.replace("2.2", "2.4")})
    repo.commit("Fix C (#3)", {code: "x = 3\n", test: "def test_a(): assert 3\n"})
    mine(open_repo(repo.path), profile, tmp_path / "tasks")
    tasks = {b.task.pr_number: b.task for b in load_all(tmp_path / "tasks")}
    assert "jax[cpu]==0.10.2" in tasks[1].dependencies and tasks[1].test.runner == "pytest"
    tags = {n: env_tag(profile, b"", t.dependencies) for n, t in tasks.items()}
    assert tags[1] == tags[2] != tags[3]
    assert env_tag(profile, b"", tasks[1].dependencies) != env_tag(profile, b"extra-ca", tasks[1].dependencies)
