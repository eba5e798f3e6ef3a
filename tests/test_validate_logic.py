from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from local_backend import LocalHost

from sweserve.dataset.project import Project
from sweserve.dataset.taskstore import load_bundle, save_bundle
from sweserve.environment.images import ImageBuilder
from sweserve.errors import InfraError, RejectionCategory, SweserveError
from sweserve.evaluation.accelerators import accelerator_kind, accelerator_tests
from sweserve.evaluation.context import Context
from sweserve.evaluation.derive import derive
from sweserve.evaluation.grading import TestRun
from sweserve.evaluation.validation import (
    ValidateOutcome,
    reason_category,
    validate_all,
)
from sweserve.models import Task, TaskBundle, TestSpec, ValidationRecord


def runs(*outcome_maps, skips=None, messages=None):
    return [TestRun(outcomes=o, skips=skips or {}, messages=messages or {}) for o in outcome_maps]


def test_derive_needs_every_run_to_agree():
    before = runs({"a": "failed", "b": "passed", "c": "passed", "d": "passed"},
                  {"a": "failed", "b": "passed", "c": "failed", "d": "passed"},
                  {"b": "passed", "c": "passed", "d": "passed"})  # a missing: its file failed to import
    after = runs({"a": "passed", "b": "passed", "c": "passed", "d": "passed", "e": "passed"},
                 {"a": "passed", "b": "passed", "c": "passed", "d": "failed", "e": "passed"},
                 {"a": "passed", "b": "passed", "c": "passed", "d": "passed", "e": "passed"})
    f2p, p2p, flaky = derive(before, after)
    assert f2p == ["a", "e"]  # e is new in the tests patch: missing before counts as not passing
    assert p2p == ["b"]
    assert flaky == ["c", "d"]


def test_accelerator_detection_from_skips_and_errors():
    after = runs({"t1": "skipped", "t2": "error", "t3": "failed", "t4": "skipped"},
                 skips={"t1": "requires TPU", "t4": "slow"},
                 messages={"t2": "RuntimeError: Unable to initialize backend 'cuda'", "t3": "AssertionError: 1 != 2"})
    found = accelerator_tests(after)
    assert set(found) == {"t1", "t2"}
    assert accelerator_kind(found) == "tpu" and accelerator_kind({"t2": found["t2"]}) == "gpu"
    assert accelerator_kind({}) is None


def test_reason_categories_come_from_the_rejection_not_its_message():
    def cat(status, category=None, reason=None):
        return reason_category(ValidateOutcome(task_id="t", family="decoding", status=status, category=category,
                                               reason=reason))
    assert cat("valid") == "valid" and cat("skipped", reason="needs 2 GPUs (host has 0)") == "skipped"
    assert cat("rejected", RejectionCategory.NEEDS_ACCELERATOR) == "needs_accelerator"
    # a reason that reads like another category changes nothing: the category was set where it was decided
    assert cat("rejected", RejectionCategory.TIMEOUT, "oracle.patch does not apply: hidden tests timed out") == "timeout"
    assert cat("rejected", None, "something new") == "other"


# --- what validation records when something other than the task fails ------------------------------------------

class ScriptedImages(Context):
    """A Context on the local test backend whose task image step is scripted per task; nothing reaches Docker."""

    def __init__(self, tmp_path, steps):
        super().__init__(LocalHost("run1", [], self.image_step), Project(tmp_path / "state"))
        self.steps = steps

    def image_step(self, spec):
        raise self.steps[spec.task_id]


def stored(tmp_path, task_id):
    task = Task(task_id=task_id, repo="o/r", profile="sglang", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                test=TestSpec(files=["test/test_a.py"]), FAIL_TO_PASS=["test/test_a.py::t"],
                validation=ValidationRecord(status="valid", runs=3))
    save_bundle(tmp_path / "tasks", TaskBundle(task=task, instruction="i\n", oracle_patch="o\n", tests_patch="t\n"))
    return load_bundle(tmp_path / "tasks" / task_id)


@pytest.mark.parametrize("exc, kind", [
    (InfraError("image_build", "building sweserve-env:x failed: connection reset"), "image_build"),
    (InfraError("docker", "creating a grade container: daemon gone"), "docker"),
    (SweserveError("task image for o__r-1 is not built and no clone of o/r is known: pass --repo-path"), "task"),
])
def test_a_failing_machine_is_an_error_and_never_unvalidates_the_task(tmp_path, exc, kind):
    bundle = stored(tmp_path, "o__r-1")
    before = (tmp_path / "tasks" / "o__r-1" / "task.json").read_text()
    (out,) = validate_all(ScriptedImages(tmp_path, {"o__r-1": exc}), tmp_path / "tasks", [bundle], runs=1)
    assert (out.status, out.error_kind, out.category) == ("error", kind, None)
    assert out.reason == str(exc)
    assert (tmp_path / "tasks" / "o__r-1" / "task.json").read_text() == before
    assert load_bundle(tmp_path / "tasks" / "o__r-1").task.validated


def test_a_bug_during_validation_keeps_its_traceback_and_the_others_go_on(tmp_path, caplog):
    bugged, fine = stored(tmp_path, "o__r-1"), stored(tmp_path, "o__r-2")
    ctx = ScriptedImages(tmp_path, {"o__r-1": ZeroDivisionError("division by zero"),
                                    "o__r-2": InfraError("docker", "daemon gone")})
    outs = {o.task_id: o for o in validate_all(ctx, tmp_path / "tasks", [bugged, fine], runs=1, workers=2)}
    bug = outs["o__r-1"]
    assert (bug.status, bug.error_kind) == ("error", "internal")
    assert bug.reason.startswith("internal error: ZeroDivisionError: division by zero (traceback: ")
    trace = tmp_path / "state" / "logs" / "run1" / "validate" / "o__r-1" / "traceback.txt"
    assert str(trace) in bug.reason and "ZeroDivisionError" in trace.read_text()
    assert any("internal error validating o__r-1" in rec.message for rec in caplog.records)
    assert outs["o__r-2"].status == "error" and load_bundle(tmp_path / "tasks" / "o__r-1").task.validated


def test_a_failed_push_is_a_warning_and_the_built_image_is_used(caplog):
    class Images:
        def get(self, tag):
            return SimpleNamespace(tag=lambda repo, version: None)

        def push(self, repo, tag, stream, decode):
            yield {"status": "preparing"}
            yield {"error": "registry unavailable"}

    builder = ImageBuilder(SimpleNamespace(images=Images()), b"", registry="127.0.0.1:1")
    builder._publish("sweserve-task:abc")  # noqa: SLF001 - the one step under test
    assert any("cannot push 127.0.0.1:1/sweserve-task:abc" in rec.message and rec.levelname == "WARNING"
               for rec in caplog.records)
