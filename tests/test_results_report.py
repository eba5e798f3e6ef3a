from datetime import datetime, timezone

import pytest
from local_backend import LocalHost

from sweserve.agents.reference import NullAgent
from sweserve.dataset.project import Project
from sweserve.errors import SweserveError
from sweserve.evaluation.context import Context
from sweserve.evaluation.evaluate import pending
from sweserve.evaluation.results import ResultsWriter, read_results
from sweserve.evaluation.trial import evaluate_task
from sweserve.models import (
    Resources,
    RunResult,
    Task,
    TaskBundle,
    TestSpec,
    ValidationRecord,
)
from sweserve.reporting.summary import build_reports

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def result(task_id, status, family="decoding", agent="a", attempt=1, reason=None):
    return RunResult(run_id="r", task_id=task_id, family=family, agent=agent, attempt=attempt, status=status,
                     reason=reason, started_at=T0, finished_at=T0, duration_s=0.0)


def bundle(task_id, gpus=0, validated=True):
    task = Task(task_id=task_id, repo="o/r", profile="sglang", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at=T0, resources=Resources(gpus=gpus),
                test=TestSpec(files=["test/test_a.py"]),
                FAIL_TO_PASS=["test/test_a.py::t"] if validated else [],
                validation=ValidationRecord(status="valid", runs=1) if validated else None)
    return TaskBundle(task=task, instruction="i", oracle_patch="o", tests_patch="t")


def test_torn_last_line_is_dropped_and_resume_is_exact(tmp_path):
    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path)
    w.write(result("o__r-1", "resolved"))
    w.write(result("o__r-2", "failed"))
    with path.open("a") as fh:
        fh.write(result("o__r-3", "resolved").model_dump_json()[:40])  # killed mid-write
    assert [r.task_id for r in read_results(path)] == ["o__r-1", "o__r-2"]
    bundles = [bundle(f"o__r-{i}") for i in (1, 2, 3)]
    agent = NullAgent()
    agent.name = "a"
    assert [(b.task.task_id, a) for b, a in pending(bundles, agent, 1, path)] == [("o__r-3", 1)]
    assert [(b.task.task_id, a) for b, a in pending(bundles, agent, 2, path)] == [
        ("o__r-1", 2), ("o__r-2", 2), ("o__r-3", 1), ("o__r-3", 2)]
    with pytest.raises(SweserveError, match="another sweserve run is writing this results file"):
        ResultsWriter(path)  # a second writer while the first lives: refused, nothing interleaves
    w.close()
    with ResultsWriter(path) as again:
        again.write(result("o__r-3", "error"))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(line.endswith("}") for line in lines)
    assert pending(bundles, agent, 1, path) == []
    assert [b.task.task_id for b, _ in pending(bundles, agent, 1, path, retry_errors=True)] == ["o__r-3"]
    # an error the candidate's own work caused (a limit it broke) is its result: redoing it would be a free resample
    with ResultsWriter(path) as again:
        again.write(result("o__r-2", "error").model_copy(update={"error_kind": "limit"}))
    assert [b.task.task_id for b, _ in pending(bundles, agent, 1, path, retry_errors=True)] == ["o__r-3"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("garbage\n" + result("o__r-1", "resolved").model_dump_json() + "\n")
    with pytest.raises(SweserveError, match=r"r.jsonl:1: not a JSON record"):
        read_results(path)
    path.write_text('{"task_id": 1}\n')
    with pytest.raises(SweserveError, match=r"r.jsonl:1: field"):
        read_results(path)


def test_report_rates_per_family_skips_and_retries():
    results = [
        result("o__r-1", "resolved", "decoding"),
        result("o__r-2", "failed", "decoding"),
        result("o__r-3", "error", "distributed"),
        result("o__r-3", "resolved", "distributed"),  # a retried error supersedes the first record
        result("o__r-4", "skipped", "kernels-quant", reason="needs 2 GPUs (host has 0)"),
        result("o__r-1", "resolved", agent="b"),
    ]
    a, b = build_reports(results)
    assert a.agent == "a" and b.agent == "b"
    assert a.overall.tasks == 4 and a.overall.scored == 3 and a.overall.pass_at_1 == pytest.approx(2 / 3)
    assert a.families["decoding"].pass_at_1 == 0.5 and a.families["distributed"].pass_at_1 == 1.0
    assert a.families["kernels-quant"].pass_at_1 is None and a.families["kernels-quant"].scored == 0
    assert a.statuses["skipped"] == 1 and a.statuses["error"] == 0
    row = next(r for r in a.tasks if r.status == "skipped")
    assert row.reason.startswith("needs 2 GPUs")


def test_pass_at_k():
    results = [result("o__r-1", "failed", attempt=1), result("o__r-1", "resolved", attempt=2),
               result("o__r-2", "failed", attempt=1), result("o__r-2", "failed", attempt=2)]
    (rep,) = build_reports(results)
    assert rep.overall.k == 2 and rep.overall.pass_at_1 == 0.25 and rep.overall.pass_at_k == 0.5


def test_gpu_and_unvalidated_tasks_are_skipped_without_docker(tmp_path):
    ctx = Context(LocalHost("r"), Project(tmp_path))
    r = evaluate_task(ctx, bundle("o__r-1", gpus=2), NullAgent())
    assert (r.status, r.reason) == ("skipped", "needs 2 GPUs (host has 0)")
    r = evaluate_task(ctx, bundle("o__r-1", validated=False), NullAgent())
    assert r.status == "skipped" and r.reason.startswith("not validated")


def test_every_field_of_a_result_is_declared_once():
    """A second declaration silently replaces the first (RunResult.flags once had two descriptions)."""
    import ast
    from pathlib import Path

    import sweserve.models as models

    tree = ast.parse(Path(models.__file__).read_text())
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
        names = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        assert len(names) == len(set(names)), (cls.name, sorted(n for n in names if names.count(n) > 1))
