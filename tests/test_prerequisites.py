"""Cheap checks before any image (evaluation/prerequisites.py), and exporting a base commit whose tree holds a
file the clone cannot read (environment/images.export_repo_at), on repositories the tests build; no Docker."""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweserve.dataset.profiles import load_profile
from sweserve.environment.images import export_repo_at
from sweserve.errors import InfraError, TrialSkipped
from sweserve.evaluation.prerequisites import check_export, check_resources
from sweserve.models import Resources, Task, TaskBundle, TestSpec

PROFILE = load_profile("sglang-demo")


@dataclass
class FakeContext:
    """What the checks read of a Context: where the clone is, and the task's profile."""

    clone: Path | None

    def clone_for(self, repo):
        return self.clone

    def profile(self, name):
        return PROFILE


def base_with_unreadable(make_repo):
    repo = make_repo()
    base = repo.commit("base", {"python/sglang/x.py": "X = 1\n", "assets/w.bin": b"\0" * 64,
                                "test/srt/test_x.py": "from sglang.x import X\n\n\ndef test_x():\n    assert X == 1\n"})
    for path in ("assets/w.bin",):
        blob = repo.git("rev-parse", f"{base}:{path}")
        (repo.path / ".git/objects" / blob[:2] / blob[2:]).unlink()
    return repo, base


def bundle(base: str, tests_patch="diff --git a/test/srt/test_x.py b/test/srt/test_x.py\n",
           resources=None) -> TaskBundle:
    task = Task(task_id="o__r-1", repo="o/r", profile="sglang-demo", pr_number=1, title="t", base_commit=base,
                merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(files=["test/srt/test_x.py"]), resources=resources or Resources())
    return TaskBundle(task=task, instruction="# t\n",
                      oracle_patch="diff --git a/python/sglang/x.py b/python/sglang/x.py\n",
                      tests_patch=tests_patch)


def test_an_unreadable_file_no_test_needs_is_left_out_with_a_note(make_repo):
    repo, base = base_with_unreadable(make_repo)
    b = bundle(base)
    check_export(FakeContext(repo.path), b)
    assert b.task.unreadable == ["assets/w.bin"]


def test_an_unreadable_file_a_test_needs_fails_with_the_exclude_line(make_repo):
    repo, base = base_with_unreadable(make_repo)
    blob = repo.git("rev-parse", f"{base}:test/srt/test_x.py")
    (repo.path / ".git/objects" / blob[:2] / blob[2:]).unlink()
    with pytest.raises(InfraError) as exc:
        check_export(FakeContext(repo.path), bundle(base))
    assert exc.value.kind == "git" and "test/srt/test_x.py" in str(exc.value)
    assert '"exclude_paths": ["test/srt/test_x.py"]' in str(exc.value)


def test_a_base_commit_missing_from_the_clone_fails_at_once(make_repo):
    repo, _ = base_with_unreadable(make_repo)
    with pytest.raises(InfraError, match="cannot export"):
        check_export(FakeContext(repo.path), bundle("c" * 40))
    check_export(FakeContext(None), bundle("c" * 40))  # no clone: the image must exist, nothing to check here


def test_more_cpus_than_the_host_has_is_a_skip():
    with pytest.raises(TrialSkipped, match="CPUs"):
        check_resources(bundle("a" * 40, resources=Resources(cpus=(os.cpu_count() or 1) + 64)))
    check_resources(bundle("a" * 40, resources=Resources(cpus=0.5)))


def git(path: Path, *args: str, **env) -> str:
    return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, **env}).stdout


@pytest.mark.parametrize("history", ["ancestors", "none"])
def test_export_leaves_the_file_out_and_a_submission_diff_never_reads_it(make_repo, tmp_path, history):
    repo, base = base_with_unreadable(make_repo)
    dest = tmp_path / "export"
    with pytest.raises(InfraError):  # a plain export fails on the missing object
        export_repo_at(repo.path, base, tmp_path / "plain", history)
    export_repo_at(repo.path, base, dest, history, ["assets/w.bin"])
    assert git(dest, "rev-parse", "HEAD").strip() == base  # the same commit, not a rewritten one
    assert not (dest / "assets/w.bin").exists() and (dest / "python/sglang/x.py").read_text() == "X = 1\n"
    assert git(dest, "status", "--porcelain") == ""
    assert git(dest, "diff", "--cached", "--name-status", base) == ""
    # the way a submission is taken: a fresh index over a copied tree, `add -A`, a diff against base
    tree = tmp_path / "submitted"
    tree.mkdir()
    (tree / "python/sglang").mkdir(parents=True)
    (tree / "python/sglang/x.py").write_text("X = 2\n")
    (tree / "test/srt").mkdir(parents=True)
    (tree / "test/srt/test_x.py").write_text((dest / "test/srt/test_x.py").read_text())
    env = {"GIT_DIR": str(dest / ".git"), "GIT_WORK_TREE": str(tree), "GIT_INDEX_FILE": str(tmp_path / "idx")}
    git(tree, "read-tree", base, **env)
    git(tree, "add", "-A", **env)
    patch = git(tree, "diff", "--cached", "--binary", "--full-index", "--no-renames", base, **env)
    assert "python/sglang/x.py" in patch and "w.bin" not in patch


def test_a_file_a_hidden_test_names_counts_as_needed():
    from sweserve.evaluation.prerequisites import named_by

    tests = ["tests/test_video.py"]
    assert named_by("tests/data/draw.mp4", tests, ["VIDEO = DATA / 'draw.mp4'"])
    assert named_by("test/srt/lora/lora_data/hf/out.json", ["test/srt/lora/test_lora.py"],
                    ["ROOT = Path(__file__).parent / 'lora_data'"])
    # a generic folder name, or a word inside another, says nothing
    assert not named_by("tests/data/draw.mp4", tests, ["data = load()", "redraw()", "drawing = 1"])
