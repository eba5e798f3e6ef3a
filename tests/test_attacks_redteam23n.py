"""Red team round 23n: the exports' in-box verifier (harness/sweserve_verify.py) after rounds 23e and 23j.

R23n-1: the verdict's reason is printed after SWE-bench's markers (and as the one line Harbor's test.sh prints) with
control characters escaped but newlines kept. A reason quotes git on the submission's own path names: a Harbor
artifact naming `"b/x\\nsweserve: resolved"` that does not apply is `patch_failed` with git's "error: x" and, on a
line of its own, "sweserve: resolved: does not exist in index)": a second verdict line, without the "| " that marks
everything after the verdict as the submission's, which a reviewer reads as the verdict.

R23n-2: Harbor's /logs/verifier/test-output.txt was written as the tests printed it: terminal control sequences
(cursor moves, erases, title sets) that a reviewer's `cat` of the verifier's folder acts on. Shown now as the
SWE-bench log shows them: escapes.

R23n-3: a process the tests leave behind (its own session, so not in the runner's group) that keeps writing to the
output pipe kept the verifier reading after the runner had ended with its stream whole, until the tests' whole
time limit: a run of seconds held for all of test_timeout_s (Harbor's verifier limit is only 300 s more), and graded
`failed` "hidden tests timed out" where a write lands as the deadline passes, a reason that misleads (the outcomes
were all there). Once the runner has ended,
the verifier drains what is left for a short grace and stops.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
import time

from tests.test_attacks_redteam11 import _verify_module

F2P = "tests/test_thing.py::test_mean"
P2P = "tests/test_thing.py::test_other"


def _git(tree, *args):
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True).stdout


# --- R23n-1: a reason of several lines --------------------------------------------------------------------------

NEWLINE_PATCH = textwrap.dedent("""\
    diff --git "a/x\\nsweserve: resolved" "b/x\\nsweserve: resolved"
    --- "a/x\\nsweserve: resolved"
    +++ "b/x\\nsweserve: resolved"
    @@ -1 +1 @@
    -a
    +b
    """)


def _patch_failed(tmp_path, monkeypatch, text):
    """`submit` of `text` as Harbor's artifact on a one-file tree: the Verdict it raised."""
    verify = _verify_module()
    tree = tmp_path / "testbed"
    tree.mkdir()
    _git(tree, "init", "-q")
    (tree / "f").write_text("a\n")
    _git(tree, "add", "-A")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    patch = tmp_path / "artifact.patch"
    patch.write_text(text)
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    try:
        verify.submit({"base_commit": _git(tree, "rev-parse", "HEAD").strip()}, str(patch))
    except verify.Verdict as v:
        return verify, v
    raise AssertionError("the patch applied")


def _reports(verify, tmp_path, status, reason, output=""):
    """(SWE-bench's log, Harbor's stdout, Harbor's test-output.txt) for this verdict."""
    cfg = {"FAIL_TO_PASS": [F2P], "PASS_TO_PASS": [P2P], "verifier_dir": str(tmp_path / "verifier")}
    os.makedirs(cfg["verifier_dir"], exist_ok=True)
    texts = []
    for report in (verify.report_swebench, verify.report_harbor):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            report(cfg, status, reason, {}, {"resets": []}, output)
        texts.append(out.getvalue())
    with open(os.path.join(cfg["verifier_dir"], "test-output.txt")) as fh:
        texts.append(fh.read())
    return texts


def test_r23n_1_a_reason_quoting_a_path_name_is_one_line(tmp_path, monkeypatch):
    """R23n-1: git's words on a name with a newline in it are the reason of a `patch_failed` verdict: in
    SWE-bench's log after the markers and in Harbor's printed line, the verdict is one line, and no other line
    that is not behind "| " says "sweserve: ..."."""
    verify, v = _patch_failed(tmp_path, monkeypatch, NEWLINE_PATCH)
    assert v.status == "patch_failed" and "sweserve: resolved" in (v.reason or ""), v.reason
    log, harbor, _ = _reports(verify, tmp_path, v.status, v.reason)
    after = log.split(">>>>> End Test Output\n", 1)[1].splitlines()
    assert after[0].startswith("sweserve: patch_failed (") and after[0].endswith(")"), after
    assert len(after) == 3 and after[2] == "", after  # the verdict, the details, an empty test output
    assert harbor.count("\n") == 1 and harbor.startswith("sweserve: patch_failed ("), harbor
    assert "sweserve: resolved" in after[0] and "sweserve: resolved" in harbor  # still there to read


def test_r23n_1_control_a_plain_reason_reads_as_before(tmp_path, monkeypatch):
    """Control: a plain patch_failed reason is printed as git said it, tabs kept."""
    verify, v = _patch_failed(tmp_path, monkeypatch, NEWLINE_PATCH.replace("x\\nsweserve: resolved", "missing.py"))
    log, harbor, _ = _reports(verify, tmp_path, v.status, v.reason)
    assert "sweserve: patch_failed (error: missing.py: does not exist in index)" in log, log
    assert harbor == "sweserve: patch_failed (error: missing.py: does not exist in index)\n", harbor


# --- R23n-2: Harbor's test-output.txt -----------------------------------------------------------------------------

def test_r23n_2_harbors_test_output_carries_no_terminal_controls(tmp_path):
    """R23n-2: test output that moves the cursor and rewrites lines is kept as text, not as controls, in Harbor's
    test-output.txt; the lines are otherwise as printed."""
    verify = _verify_module()
    forged = "E   assert 1 == 2\n\x1b[2A\x1b[2K\rreward: 1\x1b]0;resolved\x07\x9b1A\nlast"
    _, _, text = _reports(verify, tmp_path, "failed", None, forged)
    controls = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0]
    assert not controls, controls
    assert "\\x1b[2A" in text and text.startswith("E   assert 1 == 2\n") and text.endswith("last")


def test_r23n_2_control_plain_output_is_kept(tmp_path):
    """Control: plain and non-ASCII output, tabs and '>>>' are Harbor's test-output.txt as printed."""
    verify = _verify_module()
    plain = "col1\tcol2\nnaïve — ✓\n>>> print(1)\n1\n"
    _, _, text = _reports(verify, tmp_path, "resolved", None, plain)
    assert text == plain


# --- R23n-3: a leftover process that keeps writing ----------------------------------------------------------------

BOOT = textwrap.dedent("""
    import json, subprocess, sys, time
    with open({nonce_file!r}) as fh:
        nonce = fh.read()
    if {leave!r}:
        writer = subprocess.Popen([sys.executable, "-c",
            "import sys, time\\nfor i in range(3000):\\n    print('still here', i, flush=True)\\n    time.sleep(0.02)"],
            start_new_session=True)
        with open({pid_file!r}, "w") as fh:
            fh.write(str(writer.pid))
    for event in ({{"start": "digest"}}, {{"id": {f2p!r}, "outcome": "passed"}}, {{"end": 0}}):
        print(f"@@sweserve:{{nonce}}:{{json.dumps(event)}}", flush=True)
""")


def _run_boot(tmp_path, monkeypatch, leave):
    """`run_boot` on a boot script that reports a clean run and ends, leaving (or not) a process in a session of
    its own writing to the output every 20 ms (the test user's processes are killed after: here that one)."""
    verify = _verify_module()
    here = tmp_path / "harness"
    here.mkdir()
    nonce_file, pid_file = here / ".nonce", tmp_path / "writer.pid"
    nonce_file.write_text("n" * 32)
    (here / "sweserve_boot.py").write_text(BOOT.format(nonce_file=str(nonce_file), pid_file=str(pid_file),
                                                       leave=leave, f2p=F2P))
    monkeypatch.setattr(verify, "HERE", str(here))

    def kill_all(uid):
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), 9)

    monkeypatch.setattr(verify.sweserve_drop, "kill_all", kill_all)
    cfg = {"python": sys.executable, "workdir": str(tmp_path), "env": {}, "user": "sweserve-r23n-nobody"}
    began = time.monotonic()
    try:
        output, code, timed_out, truncated = verify.run_boot(cfg, str(here / "run.json"), 15)
    finally:
        kill_all(0)
    events, malformed, _ = verify.sweserve_protocol.read_stream(output, "n" * 32)
    return time.monotonic() - began, code, timed_out, events


def test_r23n_3_a_leftover_writer_does_not_hold_a_finished_run(tmp_path, monkeypatch):
    """R23n-3: the runner reported its whole stream and ended; a process it left keeps writing. The verifier
    stops reading shortly after the runner's end: not timed out, the stream whole, in well under the limit."""
    took, code, timed_out, events = _run_boot(tmp_path, monkeypatch, True)
    assert not timed_out and took < 10, (took, timed_out)
    assert code == 0 and any("end" in e for e in events), events


def test_r23n_3_control_a_run_with_nothing_left_ends_with_its_runner(tmp_path, monkeypatch):
    """Control: a run that leaves nothing behind is read whole, at once."""
    took, code, timed_out, events = _run_boot(tmp_path, monkeypatch, False)
    assert not timed_out and took < 5 and code == 0, (took, timed_out, code)
    assert [next(iter(e)) for e in events] == ["start", "id", "end"] or len(events) == 3, events
