"""Readiness (dataset/readiness.py), the funnel (dataset/funnel.py, `sweserve tasks funnel`) and ready-only
selection in run, export and report, without Docker."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from sweserve.dataset.funnel import compute, save_mine_record
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.readiness import assess, family_verdict, instruction_digest
from sweserve.dataset.taskstore import load_task, save_bundle, save_task
from sweserve.models import (
    QualityRecord,
    RunResult,
    SignalCheck,
    Task,
    TaskBundle,
    TestSpec,
    Twin,
    ValidationRecord,
)

ROOT = Path(__file__).resolve().parent.parent
PROFILE = load_profile("sglang-demo")


def task(n=1, **kw) -> Task:
    fields = dict(task_id=f"o__r-{n}", repo="o/r", profile="sglang-demo", pr_number=n, title="t", base_commit="a" * 40,
                  merge_commit="b" * 40, family="decoding", family_confidence=0.9, family_confident=True, family_scores={"decoding": 0.9},
                  created_at="2026-01-01T00:00:00Z",
                  test=TestSpec(files=["test/test_a.py"]), FAIL_TO_PASS=["test/test_a.py::test_a"],
                  validation=ValidationRecord(status="valid", runs=1, forge_odds=0.25, max_forge_odds=0.25, signals=[
                      SignalCheck(name="relax_only_tests"), SignalCheck(name="cosmetic_oracle"),
                      SignalCheck(name="structure_only")]),
                  quality=QualityRecord(statement_source="pr_description", statement_chars=300,
                                        interface_from="fail_to_pass"))
    fields.update(kw)
    return Task(**fields)


def keys(t: Task) -> list[str]:
    return [r.key for r in assess(t).reasons]


def test_a_good_task_is_ready_and_says_which_family_field_it_read():
    r = assess(task())
    assert r.ready and r.reasons == [] and r.family_from == "family_confident"
    assert r.checks == {"valid": True, "lint": True, "family": True, "signals": True, "guarded": True}


def test_each_failed_check_is_a_reason():
    assert keys(task(validation=None, FAIL_TO_PASS=[])) == ["not_validated", "signal:not_run"][:1]
    rejected = ValidationRecord(status="rejected", runs=1, reason="needs an accelerator (tpu)",
                                category="needs_accelerator")
    assert keys(task(validation=rejected, FAIL_TO_PASS=[])) == ["rejected:needs_accelerator"]
    assert keys(task(quality=None)) == ["lint:not_run"]
    assert keys(task(quality=QualityRecord(interface_from="fail_to_pass", findings=["leak: x"]))) == ["lint:findings"]
    assert keys(task(family_confident=False, family_scores={"decoding": 0.5, "serving-api": 0.45})) == [
        "family_unsure"]
    assert keys(task(family_confident=None)) == ["family_unsure"]  # mined before the classifier's verdict
    fired = task()
    fired.validation.signals[2] = SignalCheck(name="structure_only", fired=True, detail="passes all")
    assert keys(fired) == ["signal:structure_only"]
    unrun = task()
    unrun.validation.signals = None
    assert keys(unrun) == ["signal:not_run"]
    # a check that could not run does not fire
    skipped = task()
    skipped.validation.signals[1] = SignalCheck(name="cosmetic_oracle", ran=False, detail="no clone")
    assert keys(skipped) == []


def test_family_override_settles_an_unsure_family():
    assert family_verdict(task(family_confident=False, family_override="decoding"))[:2] == (True, "family_override")


def test_the_classifiers_verdict_is_read_with_its_scores_as_the_reason():
    ok, source, why = family_verdict(task(family_confident=False, family_scores={"decoding": 0.55, "serving-api": 0.5}))
    assert (ok, source) == (False, "family_confident") and "decoding 0.55, serving-api 0.50" in why
    assert family_verdict(task(family_confident=True, family_scores={"decoding": 0.9}))[:2] == (True, "family_confident")


def bundle(t: Task) -> TaskBundle:
    if t.validation is not None and t.validation.forge_odds is not None:  # measured with this instruction
        t.validation.forge_odds_instruction = instruction_digest("# t\n")
    return TaskBundle(task=t, instruction="# t\n", oracle_patch="diff --git a/x b/x\n",
                      tests_patch="diff --git a/t b/t\n")


def folder(tmp_path) -> Path:
    tasks = tmp_path / "tasks"
    save_bundle(tasks, bundle(task(1)))
    save_bundle(tasks, bundle(task(2, family_confident=False)))
    t3 = task(3, FAIL_TO_PASS=[], validation=ValidationRecord(status="rejected", runs=1, category="no_fail_to_pass"))
    save_bundle(tasks, bundle(t3))
    save_bundle(tasks, bundle(task(4, validation=None, FAIL_TO_PASS=[])))
    t5 = task(5)
    t5.validation.signals = [SignalCheck(name="structure_only", fired=True, detail="layout only")]
    save_bundle(tasks, bundle(t5))
    save_mine_record(tasks, "o/r", 9, [f"o__r-{i}" for i in range(1, 6)], {"no_tests": ["#7 a", "#8 b"],
                                                                           "tests_only": ["#9 c"], "too_large": ["#6"]})
    return tasks


def test_funnel_counts_every_drop_by_reason(tmp_path):
    tasks = folder(tmp_path)
    f = compute(tasks)
    stages = {s.stage: s for s in f.stages}
    assert [s.count for s in f.stages] == [9, 5, 3, 1]
    assert stages["tasks"].dropped == {"no_tests": 2, "tests_only": 1, "too_large": 1}
    assert stages["valid"].dropped == {"not_validated": 1, "rejected:no_fail_to_pass": 1}
    assert stages["ready"].dropped == {"family_unsure": 1, "signal:structure_only": 1}
    assert set(f.not_ready) == {"o__r-2", "o__r-5"}
    assert load_task(tasks / "o__r-1").readiness is None  # not written without write
    compute(tasks, write=True)
    assert load_task(tasks / "o__r-1").ready and not load_task(tasks / "o__r-5").ready


def test_forge_odds_must_be_measured_and_within_the_bound():
    """A valid task whose FAIL_TO_PASS tests a forger in the tests' process passes by guessing with odds over
    the profile's bound (1: no twin no prior reads) is not ready; one validated before the odds were measured
    is not either (validate it again)."""
    def record(odds, bound):
        return task().validation.model_copy(update={"forge_odds": odds, "max_forge_odds": bound})

    assert keys(task(validation=record(1.0, 0.25))) == ["unguarded"]
    assert "odds 1.00, over the profile's max_forge_odds 0.25" in assess(task(validation=record(1.0, 0.25))).reasons[0].detail
    assert keys(task(validation=record(None, 0.25))) == ["unguarded"]
    assert "not measured" in assess(task(validation=record(None, None))).reasons[0].detail
    assert keys(task(validation=record(0.0625, 0.25))) == [] and keys(task(validation=record(1.0, 1.0))) == []
    assert keys(task(validation=record(0.25, None))) == []  # the default bound
    assert assess(task(validation=record(0.5, 0.25))).checks["guarded"] is False


def test_twin_groups_kept_from_one_drawn_order_are_not_ready():
    """Red team 8's R8-8: a group kept from one drawn order of the oracle's twin run may hold a test that is not
    idempotent (a call counter, a cleanup after the check), which fails honest solutions on most grading draws.
    Validation now runs each graded test first, then last, of its group (`twin_orders`); a task whose groups were
    kept before that (its record names no orders) is not ready until validated again, whatever its odds. A task
    with no group kept has nothing to hold such a test."""
    group = [Twin(test="test/test_a.py::test_a", site=0, value="13")]
    both = task().validation.model_copy(update={"twin_orders": ["first", "last"]})
    assert keys(task(twins=group)) == ["groups_one_order"]
    assert "validate it again" in assess(task(twins=group)).reasons[0].detail
    assert assess(task(twins=group)).checks["guarded"] is False
    assert keys(task(twins=group, validation=both)) == []
    assert keys(task()) == []  # no group: nothing a second order could show


def test_the_funnel_counts_unguarded_tasks_as_a_drop(tmp_path):
    tasks = tmp_path / "tasks"
    save_bundle(tasks, bundle(task(1)))
    t2 = task(2)
    t2.validation.forge_odds = 1.0
    save_bundle(tasks, bundle(t2))
    ready = {s.stage: s for s in compute(tasks).stages}["ready"]
    assert ready.count == 1 and ready.dropped == {"unguarded": 1}


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_funnel_cli_prints_a_table_and_json(tmp_path):
    tasks = folder(tmp_path)
    proc = cli("tasks", "funnel", "--tasks", str(tasks), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "rejected:no_fail_to_pass 1" in proc.stdout and "signal:structure_only 1" in proc.stdout
    assert "not ready o__r-5: structure_only: layout only" in proc.stdout
    data = json.loads(cli("tasks", "funnel", "--tasks", str(tasks), "--json", cwd=tmp_path).stdout)
    assert [(s["stage"], s["count"]) for s in data["stages"]] == [("candidates", 9), ("tasks", 5), ("valid", 3),
                                                                   ("ready", 1)]


def test_run_and_export_take_ready_tasks_unless_asked(tmp_path):
    tasks = folder(tmp_path)
    compute(tasks, write=True)
    # the one ready task, edited since its readiness was recorded: assessed again, it is not ready
    t = load_task(tasks / "o__r-1")
    assert t.ready
    t.family_confident = False
    save_task(tasks / "o__r-1", t)
    proc = cli("run", "--agent", "null", "--tasks", str(tasks), "--output", str(tmp_path / "r.jsonl"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no ready task to run" in proc.stderr
    assert "left out 5 tasks not ready (e.g. o__r-1: family not settled" in proc.stdout
    assert "assessed now" in proc.stdout
    proc = cli("export", "--format", "swebench", "--out", str(tmp_path / "x"), "--tasks", str(tasks), cwd=tmp_path)
    assert proc.returncode == 2 and "no ready task to export" in proc.stderr


def test_report_leaves_out_results_of_unready_tasks_unless_asked(tmp_path):
    def result(task_id, ready):
        return RunResult(run_id="r", task_id=task_id, family="decoding", agent="a", status="resolved",
                         started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:01Z", duration_s=1,
                         task_ready=ready).model_dump_json()

    out = tmp_path / "r.jsonl"
    out.write_text("\n".join([result("o__r-1", True), result("o__r-2", False), result("o__r-3", None)]) + "\n")
    data = json.loads(cli("report", str(out), "--json", cwd=tmp_path).stdout)
    assert data[0]["overall"]["scored"] == 2  # results from before readiness count
    data = json.loads(cli("report", str(out), "--json", "--include-unready", cwd=tmp_path).stdout)
    assert data[0]["overall"]["scored"] == 3


def test_what_mining_recorded_can_rule_readiness_out_before_validation():
    from sweserve.dataset.readiness import cannot_be_ready

    assert cannot_be_ready(task(validation=None)) == []  # validation could make it ready
    title_only = task(quality=QualityRecord(statement_source="title_only", statement_eligible=False,
                                            statement_blockers=["the statement is the PR title only"]))
    assert cannot_be_ready(title_only) == ["statement: the statement is the PR title only"]
    unsure = task(family_confident=False, family_scores={"decoding": 0.5, "serving-api": 0.45})
    assert [w.split(":")[0] for w in cannot_be_ready(unsure)] == ["family_unsure"]
    assert cannot_be_ready(task(family_confident=False, family_override="decoding")) == []


def test_validate_ready_eligible_skips_before_any_image(tmp_path):
    tasks = tmp_path / "tasks"
    blocked = task(1, validation=None, quality=QualityRecord(statement_source="title_only", statement_eligible=False,
                                                             statement_blockers=["title only"]))
    unsure = task(2, validation=None, family_confident=False)
    for t in (blocked, unsure):
        save_bundle(tasks, bundle(t))
    # no Docker is reached: both are skipped, and nothing is recorded
    proc = cli("validate", "--tasks", str(tasks), "--ready-eligible", "--runs", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 tasks skipped" in proc.stdout and "'statement': 1" in proc.stdout
    assert "'family_unsure': 1" in proc.stdout and "0 to validate" in proc.stdout
    assert load_task(tasks / "o__r-1").validation is None


def test_forge_odds_measured_with_another_instruction_are_stale(tmp_path):
    """The numbers an instruction writes are what a forger reads beside the files: odds measured before an
    interface section (or a statement mined again, or an edit) wrote the real value are stale, so the task is
    not ready until `tasks guard --write` (or validate) measures them for the instruction the candidate reads."""
    t = task()
    t.validation.forge_odds_instruction = instruction_digest("# t\n")
    assert assess(t, "# t\n").ready and assess(t).ready  # no instruction given: the record as it stands
    stale = assess(t, "# t\n\n## New interfaces\n- `max_pages(budget: int = 13)`\n")
    assert [r.key for r in stale.reasons] == ["unguarded"] and "another instruction" in stale.reasons[0].detail
    t.validation.forge_odds_instruction = None  # measured before the digest was recorded: stale too
    assert not assess(t, "# t\n").ready
    # measured under the guard's earlier rules (the instruction's digest alone): stale too
    t.validation.forge_odds_instruction = hashlib.sha256(b"# t\n").hexdigest()
    assert not assess(t, "# t\n").ready
    tasks = tmp_path / "tasks"
    save_bundle(tasks, bundle(task(1)))
    (tasks / "o__r-1" / "instruction.md").write_text("# t\n\nedited by hand: 13\n")
    f = compute(tasks)
    assert f.stages[-1].count == 0 and set(f.not_ready) == {"o__r-1"}
