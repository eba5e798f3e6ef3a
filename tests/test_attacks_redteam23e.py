"""Red team round 23e: the verifier and the exports.

R23e-1: the SWE-bench export's eval log. `sweserve_verify.report_swebench` prints the verdict between SWE-bench's
markers, then the run's reason, details and the test output, with SWE-bench's markers "broken" (`shown`: each
run of five '>' became "> > > > >"). A run of nine or more '>' was not broken: the last '>' of one replacement
and the four after it made five again, so a test that printed `>>>>>>>>> Tests Errored` put SWE-bench's own
TESTS_ERROR marker in the log, and SWE-bench's `get_logs_eval` then read the whole instance as one whose patch
did not apply (`{}, False`): a graded run reported as the harness's failure, not the candidate's. The reason and
the details line (the resets list the submission's own path names) were not broken at all.
"""

from __future__ import annotations

import contextlib
import io
import types

import pytest

from tests.test_attacks_redteam11 import _verify_module

F2P = "tests/test_thing.py::test_mean"
P2P = "tests/test_thing.py::test_other"


def _log(tmp_path, status, graded, details, output, reason=None):
    verify = _verify_module()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        verify.report_swebench({"FAIL_TO_PASS": [F2P], "PASS_TO_PASS": [P2P]}, status, reason, graded, details,
                               output)
    log = tmp_path / "test_output.txt"
    log.write_text(out.getvalue())
    return log, out.getvalue()


def _read(log):
    pytest.importorskip("swebench")
    from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status

    status_map, applied = get_logs_eval(types.SimpleNamespace(log_parser="parse_log_pytest"), str(log))
    report = get_eval_tests_report(status_map, {"FAIL_TO_PASS": [F2P], "PASS_TO_PASS": [P2P]})
    return applied, status_map, get_resolution_status(report)


@pytest.mark.parametrize("arrows", [9, 10, 13, 14, 19])
def test_r23e_1_test_output_cannot_rebuild_swebench_markers_after_the_verdict(tmp_path, arrows):
    """R23e-1: a failing run whose tests printed a long run of '>' before SWE-bench's words is read by SWE-bench
    as the failed run it is: applied, its F2P test FAILED, no marker of SWE-bench's anywhere after the verdict."""
    output = "\n".join(f"{'>' * arrows} {words}" for words in (
        "Tests Errored", "Tests Timed Out", "Reset Failed", "Patch Apply Failed", "Start Test Output",
        "End Test Output"))
    log, text = _log(tmp_path, "failed", {F2P: "failed", P2P: "passed"}, {"resets": []}, output)
    after = text.split(">>>>> End Test Output", 1)[1]
    assert ">>>>>" not in after, after
    applied, status_map, resolution = _read(log)
    assert applied and status_map.get(F2P) == "FAILED", (applied, status_map)
    assert resolution == "RESOLVED_NO"


def test_r23e_1_reason_and_details_cannot_carry_swebench_markers(tmp_path):
    """R23e-1: the details line lists what was reset by the submission's own path names, and a reason can quote
    git's stderr on them: neither puts a marker of SWE-bench's in the log."""
    details = {"resets": [">>>>> Tests Errored.py (a start-up hook)", ">>>>> Reset Failed/conftest.py (conftest)"]}
    log, text = _log(tmp_path, "failed", {F2P: "failed", P2P: "passed"}, details, "",
                     reason="x >>>>> Tests Timed Out")
    after = text.split(">>>>> End Test Output", 1)[1]
    assert ">>>>>" not in after, after
    applied, status_map, _ = _read(log)
    assert applied and status_map.get(F2P) == "FAILED", (applied, status_map)


def test_r23e_1_control_a_resolved_run_with_arrows_in_its_output_stays_resolved(tmp_path):
    """Control: '>>>' in a test's output (a doctest prompt, a shell prompt) changes nothing: resolved, and the
    output is still shown, line by line, behind "| "."""
    output = ">>> print(1)\n1\nsome -> arrow >> here"
    log, text = _log(tmp_path, "resolved", {F2P: "passed", P2P: "passed"}, {"resets": []}, output)
    assert "| >>> print(1)" in text or "| > > > print(1)" in text
    assert "| 1" in text
    applied, status_map, resolution = _read(log)
    assert applied and resolution == "RESOLVED_FULL", (status_map, resolution)


# --- R23e-2: the export's verdict on a run the submission cut short ------------------------------------------------

def _grade_with_run(monkeypatch, tmp_path, boot_result):
    """`sweserve_verify.grade` with everything before the hidden tests' run stubbed (a clean tree, no resets) and
    the run itself ending as `boot_result` says: (output, exit status, timed out, truncated)."""
    verify = _verify_module()
    here, tree = tmp_path / "harness", tmp_path / "testbed"
    here.mkdir(parents=True)
    tree.mkdir()
    (here / "tests.patch").write_text("")
    monkeypatch.setattr(verify, "HERE", str(here))
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    monkeypatch.setattr(verify, "to_base", lambda cfg: str(here / "submission.patch"))
    monkeypatch.setattr(verify, "runner_facts", lambda cfg: ("digest", [], []))
    monkeypatch.setattr(verify, "submit", lambda cfg, patch: {})
    monkeypatch.setattr(verify, "reset", lambda cfg, changed, tests_patch, installed: [])
    monkeypatch.setattr(verify, "git_file", lambda: None)
    monkeypatch.setattr(verify, "grading_plan", lambda cfg, sources: ({}, lambda o, e: (o, []), lambda out: out))
    monkeypatch.setattr(verify, "run_boot", boot_result if callable(boot_result) else
                        lambda cfg, path, timeout: boot_result)
    cfg = {"format": "harbor", "base_commit": "0" * 40, "FAIL_TO_PASS": [F2P], "PASS_TO_PASS": [P2P],
           "test_files": [], "runner": "pytest", "test_paths": [], "plugins": [], "workdir": str(tree), "env": {},
           "timeout_s": 60, "python": "python", "user": "nobody", "patch": ""}
    try:
        return verify.grade(cfg)[:2]
    except verify.Verdict as v:
        return v.status, v.reason


@pytest.mark.parametrize("boot_result", [("", 137, True, False), ("", 0, False, False)],
                         ids=["timed-out", "exited-before-its-end"])
def test_r23e_2_a_run_the_submission_cut_short_is_failed_not_an_error(monkeypatch, tmp_path, boot_result):
    """R23e-2: `sweserve run` grades hidden tests that ran past their limit, or a runner that ended before its
    stream's end (a submission's `os._exit(0)` at import), as `failed`: the submission's doing, never an error
    it could have redone (R14a-1). The export's verifier recorded both as `error` in Harbor's sweserve.json and
    SWE-bench's log: a reviewer or a harness that redoes errors gave the candidate a free resample."""
    status, reason = _grade_with_run(monkeypatch, tmp_path, boot_result)
    assert status == "failed", (status, reason)
    assert reason


def test_r23e_2_control_a_clean_run_is_still_graded(monkeypatch, tmp_path):
    """Control: a run whose stream is whole is graded on its outcomes (here the F2P test failed, exit 1)."""
    import json

    verify = _verify_module()
    events = [{"start": "digest"}, {"id": F2P, "outcome": "failed"}, {"id": P2P, "outcome": "passed"}, {"end": 1}]

    def run_boot(cfg, path, timeout):
        with open(f"{verify.HERE}/.nonce") as fh:
            nonce = fh.read()
        return "".join(f"\n@@sweserve:{nonce}:{json.dumps(e)}\n" for e in events), 1, False, False

    status, reason = _grade_with_run(monkeypatch, tmp_path, run_boot)
    assert (status, reason) == ("failed", None)
    events[1]["outcome"] = "passed"
    events[3]["end"] = 0
    ok = _grade_with_run(monkeypatch, tmp_path / "ok", lambda cfg, path, timeout: (run_boot(cfg, path, timeout)[0],
                                                                                     0, False, False))
    assert ok == ("resolved", None)
