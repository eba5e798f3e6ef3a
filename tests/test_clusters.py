"""Multi-PR tasks: a PR and its follow-ups mined as one task, and the rule for commits between them."""

import subprocess

import pytest

from sweserve.dataset.mining import ClusterOptions, mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_bundle

SRC = "python/sglang/srt/mem_cache/radix_cache.py"
TEST = "test/srt/test_radix_cache.py"
OTHER = "python/sglang/srt/managers/scheduler.py"
OTHER_TEST = "test/srt/test_scheduler.py"


@pytest.fixture
def profile():
    return load_profile("sglang")


def history(make_repo, between=None):
    """#101 fixes SRC, an unrelated PR #102 (and optionally a direct push), then #104 follows #101 up."""
    repo = make_repo()
    repo.commit("init", {SRC: "def f():\n    return 1\n", TEST: "def test_f():\n    pass\n",
                         OTHER: "x = 0\n", OTHER_TEST: "def test_x():\n    pass\n"})
    base = repo.git("rev-parse", "HEAD")
    repo.commit("[Radix] Fix prefix match (#101)\n\nStops early.",
                {SRC: "def f():\n    return 2\n", TEST: "def test_f():\n    assert f() == 2\n"})
    repo.commit("Scheduler tweak (#102)", {OTHER: "x = 1\n", OTHER_TEST: "def test_x():\n    assert 1\n"})
    if between:
        repo.commit("direct push", between)
    repo.commit("Handle the empty key too (#104)",
                {SRC: "def f(key=None):\n    return 2\n", TEST: "def test_f():\n    assert f(None) == 2\n"})
    return repo, base


def test_a_follow_up_joins_its_pr(make_repo, profile, tmp_path):
    repo, base = history(make_repo)
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks", clusters=ClusterOptions(window_days=14))
    assert sorted(report.written) == ["sgl-project__sglang-101", "sgl-project__sglang-102"]
    b = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-101")
    t = b.task
    assert (t.pr_number, t.prs, t.base_commit) == (101, [101, 104], base)
    assert t.merge_commit == repo.git("rev-parse", "HEAD")
    assert "def f(key=None)" in b.oracle_patch and OTHER not in b.oracle_patch  # #102 does not leak in
    assert "f(None) == 2" in b.tests_patch and OTHER_TEST not in b.tests_patch  # tests: their final state
    assert "## Follow-up: Handle the empty key too" in b.instruction and "Stops early." in b.instruction
    # the combined oracle applies on the base
    wt = tmp_path / "wt"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(wt), base], cwd=repo.path, check=True)
    (tmp_path / "o.patch").write_text(b.oracle_patch + b.tests_patch)
    subprocess.run(["git", "apply", str(tmp_path / "o.patch")], cwd=wt, check=True)
    assert (wt / SRC).read_text() == "def f(key=None):\n    return 2\n" and (wt / OTHER).read_text() == "x = 0\n"


def test_without_clusters_each_pr_is_its_own_task(make_repo, profile, tmp_path):
    repo, _ = history(make_repo)
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert len(report.written) == 3
    assert load_bundle(tmp_path / "tasks" / "sgl-project__sglang-104").task.prs == []


def test_outside_the_window_no_cluster(make_repo, profile, tmp_path):
    repo, _ = history(make_repo)  # commits are a minute apart
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks", clusters=ClusterOptions(window_days=0.0001))
    assert len(report.written) == 3


def test_a_commit_between_touching_the_cluster_rejects_it(make_repo, profile, tmp_path):
    repo, _ = history(make_repo, between={SRC: "def f():\n    return 3\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks", clusters=ClusterOptions())
    [entry] = report.rejected["cluster_interleaved"]
    assert entry.startswith("#101 [Radix] Fix prefix match (with #104): commit ")
    assert "(direct push) between the members also changes " + SRC in entry
    # found automatically, so its PRs are still mined one by one
    assert sorted(report.written) == ["sgl-project__sglang-101", "sgl-project__sglang-102", "sgl-project__sglang-104"]
    assert load_bundle(tmp_path / "tasks" / "sgl-project__sglang-104").task.prs == []


def test_a_reference_joins_and_explicit_groups(make_repo, profile, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: "a = 0\n", TEST: "def test_a():\n    pass\n", OTHER: "x = 0\n",
                         OTHER_TEST: "def test_x():\n    pass\n"})
    repo.commit("Radix: add a (#201)", {SRC: "a = 1\n", TEST: "def test_a():\n    assert 1\n"})
    repo.commit("Scheduler follow-up (#202)\n\nFollow-up to #201: the scheduler must use it.",
                {OTHER: "x = 1\n", OTHER_TEST: "def test_x():\n    assert 1\n"})
    repo.commit("Unrelated scheduler (#203)", {OTHER: "x = 2\n", OTHER_TEST: "def test_x():\n    assert 2\n"})
    report = mine(open_repo(repo.path), profile, tmp_path / "a", clusters=ClusterOptions())
    # #202 names #201; #203 touches only files of that cluster: all three form one task
    assert report.written == ["sgl-project__sglang-201"]
    assert load_bundle(tmp_path / "a" / "sgl-project__sglang-201").task.prs == [201, 202, 203]

    report = mine(open_repo(repo.path), profile, tmp_path / "b", clusters=ClusterOptions(groups=[[203, 201]]))
    # #202 sits between the group's members and changes the scheduler file #203 changes: it would leak in;
    # a group asked for is not split up
    assert report.written == ["sgl-project__sglang-202"]
    [entry] = report.rejected["cluster_interleaved"]
    assert "(with #203)" in entry and "(Scheduler follow-up (#202)) between the members also changes " + OTHER in entry


def test_cli_group_option(make_repo, tmp_path):
    from sweserve.cli import main

    repo, _ = history(make_repo)
    rc = main(["mine", "--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state"), "--repo",
               str(repo.path), "--group", "101,104"])
    assert rc == 0
    assert load_bundle(tmp_path / "tasks" / "sgl-project__sglang-101").task.prs == [101, 104]
    assert main(["mine", "--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state"), "--repo",
                 str(repo.path), "--group", "101"]) == 2
