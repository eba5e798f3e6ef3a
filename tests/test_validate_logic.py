from sweserve.errors import RejectionCategory
from sweserve.evaluation.accelerators import accelerator_kind, accelerator_tests
from sweserve.evaluation.derive import derive
from sweserve.evaluation.grading import TestRun
from sweserve.evaluation.validation import ValidateOutcome, reason_category


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
