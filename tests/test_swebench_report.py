"""`run`'s final `<model>.<run_id>.json`: the keys and the sorting of ids that swebench's own make_run_report writes."""

import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from sweserve.models import RunResult
from sweserve.reporting.swebench_report import run_report, swebench_model_name

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
MODEL = "acme/coder-v1"


def record(task_id, status, patch="diff --git a/x b/x\n", error_kind=None, attempt=1):
    return RunResult(run_id="nightly", task_id=task_id, family="decoding", agent="acme-coder-v1", attempt=attempt,
                     status=status, model_patch=patch, error_kind=error_kind,
                     reason="docker: daemon went away" if error_kind else None,
                     started_at=T0, finished_at=T0, duration_s=1.0)


CASES = {  # task → (our record, what swebench's harness would have left: report.json's resolved, or None)
    "o__r-1": (record("o__r-1", "resolved"), True),
    "o__r-2": (record("o__r-2", "failed"), False),
    "o__r-3": (record("o__r-3", "tampered"), False),
    "o__r-4": (record("o__r-4", "failed", patch=""), "empty"),
    "o__r-5": (record("o__r-5", "patch_failed"), None),  # swebench: the patch did not apply, no report
    "o__r-6": (record("o__r-6", "error", error_kind="internal"), None),
}


def test_report_has_swebench_keys_and_sorts_ids_as_swebench_does(tmp_path, monkeypatch):
    from swebench.harness.reporting import make_run_report

    monkeypatch.chdir(tmp_path)
    run_id = "nightly"
    predictions = {}
    for task_id, (r, verdict) in CASES.items():
        predictions[task_id] = {"instance_id": task_id, "model_name_or_path": MODEL,
                                "model_patch": "" if verdict == "empty" else r.model_patch}
        if isinstance(verdict, bool):
            folder = tmp_path / "logs" / "run_evaluation" / run_id / MODEL.replace("/", "__") / task_id
            folder.mkdir(parents=True)
            (folder / "report.json").write_text(json.dumps({task_id: {"resolved": verdict}}))
    dataset = [{"instance_id": t} for t in [*CASES, "o__r-7", "o__r-8"]]  # 7: skipped here, 8: never run
    path = make_run_report(predictions, dataset, run_id, client=None, report_dir=str(tmp_path / "sb"))
    theirs = json.loads(path.read_text())

    results = [c[0] for c in CASES.values()] + [record("o__r-7", "skipped"), record("o__r-2", "resolved", attempt=2)]
    ours = run_report(results, "acme-coder-v1", [d["instance_id"] for d in dataset], submitted=list(CASES))
    assert list(ours) == list(theirs)  # the same keys, in the same order
    assert path.name == f"{swebench_model_name(MODEL)}.{run_id}.json"
    for key in ("total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances", "completed_ids",
                "incomplete_ids", "empty_patch_ids", "submitted_ids", "resolved_ids", "unresolved_ids", "error_ids",
                "schema_version"):
        assert ours[key] == theirs[key], key
    assert ours["resolved_ids"] == ["o__r-1"] and ours["unresolved_ids"] == ["o__r-2", "o__r-3"]
    for value, same in zip(ours.values(), theirs.values(), strict=True):
        assert type(value) is type(same)


def test_infra_errors_are_named_with_their_reason():
    ours = run_report([record("o__r-1", "error", error_kind="docker")], "acme-coder-v1", ["o__r-1"])
    assert ours["infra_failure_ids"] == ["o__r-1"] and ours["error_ids"] == ["o__r-1"]
    assert ours["failure_reasons"] == {"o__r-1": "docker: daemon went away"}


@pytest.mark.parametrize("args, needle", [
    (["--run-id", "../up"], "--run-id '../up': use letters"),
    (["--timeout", "0"], "--timeout must be at least 1"),
])
def test_run_options_in_swebench_spelling_are_checked(tmp_path, args, needle):
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "run", "--agent", "null", *args],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and needle in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_run_accepts_swebench_option_names():
    from sweserve.cli import build_parser

    args = build_parser().parse_args(["run", "--predictions", "p.jsonl", "--model-name", "m", "--run-id", "r1",
                                      "--timeout", "60"])
    assert (args.agent_name, args.run_id, args.timeout) == ("m", "r1", 60)
