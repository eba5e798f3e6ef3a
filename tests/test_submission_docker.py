"""The trusted submission against a real Docker daemon: the candidate's tree, diffed where it never ran."""

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.demo import files
from sweserve.evaluation import submission
from sweserve.evaluation.trial import evaluate_task

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
FIX = "python/sglang/srt/distributed/parallel_state.py"


def test_tree_with_links_modes_binaries_deletions_and_ignored_files(demo):
    b = demo.bundle(DIST)
    agent = CommandAgent(
        f"cat > {FIX} <<'EOF'\n{files.PR_DISTRIBUTED[FIX]}EOF\n"
        "ln -s sglang/srt python/srt_link && chmod +x python/sglang/__init__.py && "
        "printf 'A\\0B\\x01\\xff' > python/sglang/blob.bin && git rm -q README.md && "
        "printf '*.log\\n' > .gitignore && echo noise > debug.log && "
        "mkdir -p vendor/lib/.git python/sglang/__pycache__ && echo 'x = 1' > vendor/lib/mod.py && "
        "echo junk > vendor/lib/.git/HEAD && echo stale > python/sglang/__pycache__/x.cpython-311.pyc && "
        "git config diff.external /bin/false && rm -rf .git",  # the candidate's git state plays no part
        name="tree")
    r = evaluate_task(demo.ctx, b, agent)
    assert r.status == "resolved", r.reason
    patch = r.model_patch
    assert "diff --git a/python/srt_link b/python/srt_link\nnew file mode 120000" in patch
    assert "old mode 100644\nnew mode 100755" in patch
    assert "GIT binary patch" in patch and "python/sglang/blob.bin" in patch
    assert "diff --git a/README.md b/README.md\ndeleted file mode" in patch
    assert "a/.gitignore" in patch and "debug.log" not in patch.replace("+*.log", "")
    assert "vendor/lib/mod.py" in patch and ".git/HEAD" not in patch and "__pycache__" not in patch
    assert r.flags == ["binary or compiled module (python/sglang/blob.bin)"] and r.resets == []  # flagged, not failed


def test_an_oversized_tree_is_not_a_submission(demo, monkeypatch):
    monkeypatch.setattr(submission, "MAX_TREE_BYTES", 1 << 20)
    r = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent("head -c 2000000 /dev/zero > big.bin", name="big"))
    assert r.status == "patch_failed" and "over 1 MiB" in r.reason


def test_verifier_sandboxes_have_no_network(demo):
    """The grade sandbox is offline whatever is asked; a candidate's when its agent reaches no endpoint."""
    b = demo.bundle(DIST)
    for role, offline in (("grade", False), ("candidate", True)):
        with demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, role, b.task.resources, [], offline) as box:
            box.container.reload()
            assert box.container.attrs["HostConfig"]["NetworkMode"] == "none"
            assert box.exec("cat /sys/class/net/*/operstate | sort -u", 30).output.split() in (["down", "unknown"],
                                                                                              ["unknown"])


def test_a_runner_changed_after_the_grade_sandbox_started_is_caught(demo):
    """Runs after the first (validation's k runs) follow code under test in the same sandbox: pytest is re-hashed."""
    from sweserve.evaluation.grading import apply_patch, run_tests
    from sweserve.evaluation.verifier import first_look

    b = demo.bundle(DIST)
    with demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, "grade", b.task.resources, []) as box:
        manifest = first_look(box, b, "", "candidate").manifest  # the harness in, its digest taken
        apply_patch(box, b.tests_patch, "tests")
        first = run_tests(box, b.task, 120, manifest)
        assert first.tampered == [] and first.exit_status == 1
        assert first.outcomes[b.task.FAIL_TO_PASS[0]] == "failed"
        box.exec("echo '# changed' >> $(python -c 'import _pytest.runner as m; print(m.__file__)')", 30)
        assert run_tests(box, b.task, 120, manifest).tampered == [
            "pytest's installed files or the harness changed before the run"]
