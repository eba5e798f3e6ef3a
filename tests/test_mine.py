import subprocess

import pytest

from sweserve.dataset.mining import mine, open_repo, parse_pr
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all, load_bundle
from sweserve.errors import SweserveError

SRC = "python/sglang/srt/mem_cache/radix_cache.py"
TEST = "test/srt/test_radix_cache.py"
PNG = bytes(range(256)) * 4  # not text: git treats it as binary


@pytest.fixture
def profile():
    return load_profile("sglang")


def base_repo(make_repo):
    repo = make_repo()
    repo.commit("init", {SRC: "def f():\n    return 1\n", TEST: "def test_f():\n    pass\n", "README.md": "x\n"})
    return repo


def apply_check(repo, base, patch, tmp_path, name):
    """The patch applies with `git apply` on a checkout of base."""
    wt = tmp_path / f"wt-{name}"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(wt), base], cwd=repo.path, check=True)
    (tmp_path / f"{name}.patch").write_text(patch)
    proc = subprocess.run(["git", "apply", "--binary", str(tmp_path / f"{name}.patch")], cwd=wt,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return wt


def test_squash_pr_becomes_task(make_repo, profile, tmp_path):
    repo = base_repo(make_repo)
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit("[Radix] Fix prefix match (#42)\n\nMatching stops early.\n\nSigned-off-by: a <a@b>",
                       {SRC: "def f():\n    return 2\n", TEST: "def test_f():\n    assert 1\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert report.written == ["sgl-project__sglang-42"]
    bundle = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-42")
    t = bundle.task
    assert (t.base_commit, t.merge_commit, t.pr_number) == (base, head, 42)
    assert t.title == "[Radix] Fix prefix match"
    assert t.family == "scheduling-memory"
    assert t.test.files == [TEST]
    assert "Matching stops early." in bundle.instruction and "Signed-off-by" not in bundle.instruction
    assert SRC in bundle.oracle_patch and TEST not in bundle.oracle_patch
    assert TEST in bundle.tests_patch and SRC not in bundle.tests_patch
    wt = apply_check(repo, base, bundle.oracle_patch, tmp_path, "oracle")
    assert (wt / SRC).read_text() == "def f():\n    return 2\n"


def test_merge_commit_pr_uses_first_parent(make_repo, profile, tmp_path):
    repo = base_repo(make_repo)
    base = repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("work in progress", {SRC: "def f():\n    return 3\n"})
    repo.commit("add test", {TEST: "def test_f():\n    assert f\n"})
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge pull request #7 from me/feature\n\nFix f\n\nBody text.", "feature")
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert report.written == ["sgl-project__sglang-7"]
    assert report.scanned == 2  # first-parent: the branch commits are not walked
    t = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-7")
    assert t.task.base_commit == base and t.task.title == "Fix f" and "Body text." in t.instruction


def test_binary_and_renamed_files_survive(make_repo, profile, tmp_path):
    repo = base_repo(make_repo)
    repo.commit("add helper", {"python/sglang/srt/mem_cache/old_name.py": "X = 1\n" * 20})
    base = repo.git("rev-parse", "HEAD")
    repo.git("mv", "python/sglang/srt/mem_cache/old_name.py", "python/sglang/srt/mem_cache/new_name.py")
    repo.commit("Rename and add asset (#9)", {
        "python/sglang/srt/mem_cache/logo.png": PNG,
        SRC: "def f():\n    return 9\n",
        TEST: "def test_f():\n    assert 9\n",
    })
    mine(open_repo(repo.path), profile, tmp_path / "tasks")
    bundle = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-9")
    assert "GIT binary patch" in bundle.oracle_patch
    assert "rename from python/sglang/srt/mem_cache/old_name.py" in bundle.oracle_patch
    wt = apply_check(repo, base, bundle.oracle_patch, tmp_path, "oracle")
    assert (wt / "python/sglang/srt/mem_cache/logo.png").read_bytes() == PNG
    assert (wt / "python/sglang/srt/mem_cache/new_name.py").exists()
    assert not (wt / "python/sglang/srt/mem_cache/old_name.py").exists()


def test_binary_rejected_when_profile_forbids_it(make_repo, profile, tmp_path):
    repo = base_repo(make_repo)
    repo.commit("Add asset (#10)", {"python/sglang/srt/mem_cache/logo.png": PNG, TEST: "def test_f():\n    assert 2\n"})
    report = mine(open_repo(repo.path), profile.model_copy(update={"allow_binary": False}), tmp_path / "tasks")
    assert report.rejected == {"binary": ["#10 Add asset"]}


def test_rejections_are_counted_with_reasons(make_repo, profile, tmp_path):
    repo = base_repo(make_repo)
    repo.commit("Docs only (#1)", {"README.md": "y\n"})
    repo.commit("Tests only (#2)", {TEST: "def test_f():\n    assert 3\n"})
    repo.commit("direct push, no PR", {SRC: "def f():\n    return 0\n"})
    repo.commit("Huge (#3)", {SRC: "x = 1\n" * 3000, TEST: "def test_f():\n    assert 4\n"})
    repo.commit("Elsewhere (#4)", {"docs/x.py": "x = 1\n", TEST: "def test_f():\n    assert 5\n"})
    repo.commit("Only a conftest (#5)", {"python/sglang/srt/managers/s.py": "x = 5\n", "test/conftest.py": "x = 1\n"})
    repo.commit("Kernel test in C++ (#6)", {"sgl-kernel/csrc/a.cu": "//\n", "sgl-kernel/tests/test_a.cu": "//\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert report.scanned == 8 and report.candidates == 6 and report.written == []
    assert {k: [x.split()[0] for x in v] for k, v in report.rejected.items()} == {
        "no_tests": ["#1"], "tests_only": ["#2"], "too_large": ["#3"], "unclassified": ["#4"],
        "no_test_files": ["#5"], "non_python": ["#6"],
    }


def test_limit_since_and_existing_tasks(make_repo, profile, tmp_path):
    repo = base_repo(make_repo)
    for n in (1, 2, 3):
        repo.commit(f"Fix {n} (#{n})", {SRC: f"def f():\n    return {n}0\n", TEST: f"def test_f():\n    assert {n}\n"})
    r = mine(open_repo(repo.path), profile, tmp_path / "tasks", limit=2)
    assert r.written == ["sgl-project__sglang-3", "sgl-project__sglang-2"]
    r = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert r.written == ["sgl-project__sglang-1"] and sorted(r.existing) == ["sgl-project__sglang-2", "sgl-project__sglang-3"]
    assert len(load_all(tmp_path / "tasks")) == 3
    r = mine(open_repo(repo.path), profile, tmp_path / "other", since="2100-01-01")
    assert r.scanned == 0


def test_parse_pr_forms(make_repo):
    repo = make_repo()
    repo.commit("root")
    repo.commit("Fix thing (#123)")
    repo.commit("Fix (#12) then more")
    g = open_repo(repo.path)
    commits, _ = g.walk("HEAD")  # newest first
    assert parse_pr(commits[1]).number == 123 and parse_pr(commits[1]).title == "Fix thing"
    assert parse_pr(commits[0]) is None
    assert parse_pr(commits[2]) is None  # the root commit has no base


def test_not_a_repo(tmp_path):
    with pytest.raises(SweserveError, match="not a git repository"):
        open_repo(tmp_path)


def test_profile_resources_are_every_mined_tasks_defaults(make_repo, profile, tmp_path):
    """A repository whose tests need more than the 4 GB default (jax kernels in interpret mode) says so once, in
    its profile; a task's own CI registration still sets its GPUs and test timeout on top."""
    from sweserve.models import Resources

    repo = base_repo(make_repo)
    repo.commit("[Radix] Fix prefix match (#42)\n\nMatching stops early.",
                {SRC: "def f():\n    return 2\n", TEST: "def test_f():\n    assert 1\n"})
    roomy = profile.model_copy(update={"resources": Resources(memory_gb=12, cpus=4)})
    mine(open_repo(repo.path), roomy, tmp_path / "tasks")
    r = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-42").task.resources
    assert (r.memory_gb, r.cpus, r.gpus) == (12, 4, 0)
    assert profile.resources == Resources()  # the profile's own copy is untouched


def test_mining_reads_the_fix_map_of_methods_from_the_base_files(make_repo, profile, tmp_path):
    """A changelog naming four changed methods deep in long bodies (the hunks' headers name only the classes):
    mining reads the base files (`mining.base_functions`), so the statement is not eligible."""
    from test_fix_maps import DEEP_CHANGELOG, POOL_BASE, WORKER_BASE

    repo = make_repo()
    files = {"python/sglang/srt/mem_cache/worker.py": WORKER_BASE, "python/sglang/srt/mem_cache/pool.py": POOL_BASE}
    repo.commit("init", {**files, TEST: "def test_f():\n    pass\n"})
    changed = {p: t.replace(".get(9)\n", ".get(9) or 0\n") for p, t in files.items()}
    repo.commit(f"Default missing entries to zero (#43)\n\n{DEEP_CHANGELOG}",
                {**changed, TEST: "def test_f():\n    assert 1\n"})
    mine(open_repo(repo.path), profile, tmp_path / "tasks")
    quality = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-43").task.quality
    assert any(leak.startswith("statement maps the fix") for leak in quality.leaks), quality.leaks
    assert not quality.statement_eligible
