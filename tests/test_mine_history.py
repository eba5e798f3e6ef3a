"""Mining survives bad history (a corrupt object, a shallow clone), leaves out excluded paths, and re-mining
updates what the profile derives while keeping validation results."""

import subprocess

import pytest

from sweserve.dataset.gitio import Git, GitError
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_bundle, save_task
from sweserve.models import ValidationRecord

SRC = "python/sglang/srt/mem_cache/radix_cache.py"
TEST = "test/srt/test_radix_cache.py"
EXTRA = "python/sglang/srt/mem_cache/extra.py"


@pytest.fixture
def profile():
    return load_profile("sglang")


def three_prs(make_repo):
    repo = make_repo()
    repo.commit("init", {SRC: "def f():\n    return 1\n", TEST: "def test_f():\n    pass\n"})
    repo.commit("Fix one (#1)", {SRC: "def f():\n    return 10\n", TEST: "def test_f():\n    assert 1\n"})
    repo.commit("Fix two (#2)", {EXTRA: "UNIQUE = 'only in two'\n", TEST: "def test_f():\n    assert 2\n"})
    repo.commit("Fix three (#3)", {SRC: "def f():\n    return 30\n", TEST: "def test_f():\n    assert 3\n",
                                   "python/sglang/srt/mem_cache/table.json": "{}\n"})
    return repo


def corrupt(repo, spec):
    sha = repo.git("rev-parse", spec)
    obj = repo.path / ".git" / "objects" / sha[:2] / sha[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"not a zlib stream")
    return sha


def test_a_corrupt_object_rejects_its_pr_and_the_others_go_on(make_repo, profile, tmp_path):
    repo = three_prs(make_repo)
    repo.commit("direct push", {EXTRA: "UNIQUE = 'now different'\n"})  # git would read a checked-out copy
    sha = corrupt(repo, f"HEAD~2:{EXTRA}")
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert sorted(report.written) == ["sgl-project__sglang-1", "sgl-project__sglang-3"]
    [entry] = report.rejected["git_error"]
    assert entry.startswith("#2 Fix two: ") and sha in entry  # git's own message names the object
    assert not (tmp_path / "tasks" / "sgl-project__sglang-2").exists()


def test_reading_a_corrupt_file_is_a_git_error_and_the_reader_recovers(make_repo):
    repo = three_prs(make_repo)
    corrupt(repo, f"HEAD~1:{EXTRA}")
    with Git(repo.path) as g:
        with pytest.raises(GitError, match="unable to|inflate|corrupt"):
            g.read("HEAD", EXTRA)
        assert g.read("HEAD", SRC) == "def f():\n    return 30\n"
        assert g.read("HEAD", "no/such/file") is None


def test_a_shallow_clone_rejects_the_pr_at_its_boundary(make_repo, profile, tmp_path):
    repo = three_prs(make_repo)
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo.path}", str(shallow)], check=True)
    report = mine(open_repo(shallow), profile, tmp_path / "tasks")
    assert report.written == ["sgl-project__sglang-3"]
    assert report.rejected["git_error"] == [
        "#2 Fix two: its parent is beyond the shallow clone's boundary (fetch more history)"]


def test_excluded_paths_stay_out_of_tasks(make_repo, profile, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: "x = 0\n", TEST: "def test_f():\n    pass\n"})
    repo.commit("Add data (#4)", {SRC: "x = 1\n", TEST: "def test_f():\n    assert 1\n",
                                  "test/srt/data/weights.safetensors": b"\0" * 5000,
                                  "python/sglang/srt/mem_cache/table.bin": b"\1" * 100})
    profile = profile.model_copy(update={"exclude_paths": ["*.safetensors", "*.bin"]})
    mine(open_repo(repo.path), profile, tmp_path / "tasks")
    b = load_bundle(tmp_path / "tasks" / "sgl-project__sglang-4")
    assert "safetensors" not in b.tests_patch and "table.bin" not in b.oracle_patch
    assert SRC in b.oracle_patch and TEST in b.tests_patch


def test_remining_updates_derived_fields_and_keeps_validation(make_repo, profile, tmp_path):
    repo = three_prs(make_repo)
    tasks = tmp_path / "tasks"
    mine(open_repo(repo.path), profile, tasks)
    task_dir = tasks / "sgl-project__sglang-3"
    task = load_bundle(task_dir).task
    task.FAIL_TO_PASS = [f"{TEST}::test_f"]
    task.validation = ValidationRecord(status="valid", runs=3)
    task.resources.needs_accelerator = "gpu"
    task.resources.gpus = 1
    save_task(task_dir, task)

    ids = ["sgl-project__sglang-1", "sgl-project__sglang-2", "sgl-project__sglang-3"]
    same = mine(open_repo(repo.path), profile, tasks)
    assert sorted(same.existing) == ids and not same.updated

    changed = profile.model_copy(update={"test_env": {"PYTHONPATH": "python", "X": "1"}, "runner": "unittest"})
    report = mine(open_repo(repo.path), changed, tasks)
    assert sorted(report.updated) == ids and not report.written and not report.replaced
    again = load_bundle(task_dir).task
    assert again.test.env["X"] == "1" and again.test.runner == "unittest"
    assert again.validated and again.FAIL_TO_PASS == [f"{TEST}::test_f"]
    assert again.resources.needs_accelerator == "gpu" and again.resources.gpus == 1

    # patches that change (a data file now excluded) drop the validation: it was about other patches
    narrower = changed.model_copy(update={"exclude_paths": ["*.json"]})
    report = mine(open_repo(repo.path), narrower, tasks)
    assert report.replaced == ["sgl-project__sglang-3"] and sorted(report.existing) == ids[:2]
    replaced = load_bundle(task_dir)
    assert "table.json" not in replaced.oracle_patch
    assert replaced.task.validation is None and not replaced.task.FAIL_TO_PASS


def test_an_unreadable_commit_stops_the_walk_with_a_note(make_repo, profile, tmp_path):
    repo = three_prs(make_repo)
    corrupt(repo, "HEAD~2")  # the commit object of #1
    report = mine(open_repo(repo.path), profile, tmp_path / "tasks")
    assert report.written == ["sgl-project__sglang-3"]  # what was read before the bad commit still counts
    [note] = [n for n in report.notes if "locking failed" not in n]  # uv is offline in tests (conftest)
    head = repo.git("rev-parse", "HEAD")
    assert note.startswith(f"history read up to {head[:12]} only: fatal: ") and "corrupt" in note


def test_remining_with_a_new_statement_keeps_validation_and_asks_for_lint_again(make_repo, profile, tmp_path):
    """Mined offline, validated, linted and ready; mined again with a better statement (as `--github` gives):
    the new statement is written, validation stays, and the task is not ready until lint has read it."""
    from dataclasses import dataclass

    from sweserve.dataset.readiness import assess
    from sweserve.dataset.statement import StatementMaker, build_statement
    from sweserve.models import QualityRecord, SignalCheck

    @dataclass
    class FromGitHub(StatementMaker):
        def __call__(self, number, title, commit_body, oracle_patch, tests_patch, enclosing=None):
            return build_statement(title, "After a request is aborted, `f` keeps returning the value from before "
                                   "the last write, so callers read stale results.",
                                   oracle_patch=oracle_patch, tests_patch=tests_patch)

    repo = three_prs(make_repo)
    tasks = tmp_path / "tasks"
    mine(open_repo(repo.path), profile, tasks)
    task_dir = tasks / "sgl-project__sglang-3"
    bundle = load_bundle(task_dir)
    task = bundle.task
    task.FAIL_TO_PASS = [f"{TEST}::test_f"]
    task.validation = ValidationRecord(status="valid", runs=1, forge_odds=0.25, signals=[SignalCheck(name="cosmetic_oracle")])
    task.quality = QualityRecord(statement_source="commit_message", interface_from="fail_to_pass")
    task.family_override = task.family
    task.readiness = assess(task)
    assert task.ready
    save_task(task_dir, task)
    section = "<!-- sweserve:interface -->\n## New interfaces\n\n- function `f`\n<!-- /sweserve:interface -->\n"
    (task_dir / "instruction.md").write_text(bundle.instruction + "\n" + section)  # as lint --write leaves it

    same = mine(open_repo(repo.path), profile, tasks)  # the same statement: nothing to do
    assert "sgl-project__sglang-3" in same.existing

    report = mine(open_repo(repo.path), profile, tasks, statements=FromGitHub("sgl-project/sglang"))
    assert "sgl-project__sglang-3" in report.updated and not report.replaced
    again = load_bundle(task_dir)
    assert "callers read stale results" in again.instruction
    assert again.task.validated and again.task.FAIL_TO_PASS == [f"{TEST}::test_f"]
    assert again.task.quality.interface_from is None  # mining's record: lint has not read this statement
    assert not again.task.ready
    # lint must read the new statement, and the forge odds were measured with the old one (its numbers)
    assert [r.key for r in again.task.readiness.reasons] == ["lint:not_run", "unguarded"]
