"""Red team round 23j: the exports' in-box verifier (harness/sweserve_verify.py) after round 23e's fixes.

R23j-1: `config_changed` reads a pytest config the submission changed (`setup.cfg`, `tox.ini`, `pyproject.toml`)
with `read_regular`, which follows links and reads the whole file, whatever its size. A git binary literal is
deflated (about 1000:1 on a run of one byte): a patch of a few MB writes a setup.cfg of GBs, or the patch links
setup.cfg to one of the image's GB-sized libraries (torch's). The root verifier reads it all, decodes it, and
configparser quotes its first line in its error: several times the file's size in memory before the hidden tests
run. Under the task's memory limit the verifier is killed with no verdict (SWE-bench: no markers, the harness's
error, not the candidate's failure; Harbor: no reward, the trial left out of the mean). The host
(`Sandbox.read_file`) never follows a link and stops at 16 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _git(tree, *args):
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True).stdout


def _repo(tmp_path, setup_cfg: str):
    """A tree at base (setup.cfg, a test file), its base commit and a tests.patch adding a hidden test."""
    tree = tmp_path / "testbed"
    tree.mkdir(parents=True)
    _git(tree, "init", "-q")
    (tree / "setup.cfg").write_text(setup_cfg)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    _git(tree, "add", "-A")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = _git(tree, "rev-parse", "HEAD").strip()
    (tree / "tests" / "test_hidden.py").write_text("def test_hidden():\n    assert True\n")
    _git(tree, "add", "-A")
    tests_patch = tmp_path / "tests.patch"
    tests_patch.write_text(_git(tree, "diff", "--cached", "--binary", base))
    _git(tree, "reset", "-q", "--hard", base)
    return tree, base, tests_patch


RESET = textwrap.dedent("""
    import json, os, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))  # the attack's read stays this machine's size
    sys.path[:0] = [{tests!r}, {root!r}]
    from test_attacks_redteam11 import _verify_module
    verify = _verify_module()
    verify.WORKDIR = {tree!r}
    cfg = {{"base_commit": {base!r}, "test_files": ["tests/test_hidden.py"], "test_paths": ["tests/*"]}}
    changed = verify.submit(cfg, {patch!r})
    if {big!r}:
        with open({big!r}, "ab") as fh:
            fh.truncate(8 * 2**30)
    if {link!r}:
        os.unlink({link!r})
        os.symlink({big!r}, {link!r})
    resets = verify.reset(cfg, changed, {tests_patch!r}, [])
    print(json.dumps([r.describe() for r in resets]))
""")


def _reset_in_child(tmp_path, tree, base, tests_patch, big=None, link=None):
    """`reset` on the submission in `tree` (its diff to base as the patch), in a child process with 2 GB of
    address space and 60 s: (exit status, the resets it printed or its stderr). `big`: a file made 8 GB (sparse)
    once the patch is applied, as the patch's binary literal would have written it; `link`: a path then made a
    link to `big`."""
    patch = tmp_path / "submission.patch"
    patch.write_text(_git(tree, "diff", "--binary", "--full-index", base))
    _git(tree, "reset", "-q", "--hard", base)
    script = RESET.format(tests=HERE, root=ROOT, tree=str(tree), base=base, patch=str(patch),
                          tests_patch=str(tests_patch), big=str(big or ""), link=str(link or ""))
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "reset ran past 60 s"
    return proc.returncode, (proc.stdout.strip().splitlines() or [""])[-1] if proc.returncode == 0 else proc.stderr


@pytest.mark.parametrize("how", ["file", "link"])
def test_r23j_1_a_huge_pytest_config_does_not_exhaust_the_verifier(tmp_path, how):
    """R23j-1: base's setup.cfg replaced by an 8 GB file (sparse here: no disk, no time to write), or by a link to
    one outside the tree. The verifier decides on the resets in a moment, in well under 2 GB, and resets it (a
    config it will not read whole is not the submission's to keep); the hidden tests are set up."""
    tree, base, tests_patch = _repo(tmp_path, "[metadata]\nname = thing\n\n[tool:pytest]\naddopts = -q\n")
    big = tree / "setup.cfg" if how == "file" else tmp_path / "libhuge.so"
    (tree / "setup.cfg").write_text("[metadata]\nname = thing\n\n[tool:pytest]\naddopts = -q -p evil\n")
    code, out = _reset_in_child(tmp_path, tree, base, tests_patch, big=big,
                                link=tree / "setup.cfg" if how == "link" else None)
    assert code == 0, out
    assert any(r.startswith("setup.cfg") for r in json.loads(out)), out
    assert (tree / "tests" / "test_hidden.py").is_file()


def test_r23j_1_control_a_changed_pytest_section_is_still_reset_and_an_unchanged_one_kept(tmp_path):
    """Control: a setup.cfg whose [tool:pytest] the submission edits is reset; one whose other sections it edits
    is the submission's own."""
    tree, base, tests_patch = _repo(tmp_path, "[metadata]\nname = thing\n\n[tool:pytest]\naddopts = -q\n")
    (tree / "setup.cfg").write_text("[metadata]\nname = thing\n\n[tool:pytest]\naddopts = -q -p evil\n")
    code, out = _reset_in_child(tmp_path, tree, base, tests_patch)
    assert code == 0, out
    assert any(r.startswith("setup.cfg") for r in json.loads(out)), out
    tree2, base2, tests_patch2 = _repo(tmp_path / "kept", "[metadata]\nname = thing\n\n[tool:pytest]\naddopts = -q\n")
    (tree2 / "setup.cfg").write_text("[metadata]\nname = other\n\n[tool:pytest]\naddopts = -q\n")
    code, out = _reset_in_child(tmp_path / "kept", tree2, base2, tests_patch2)
    assert code == 0, out
    assert json.loads(out) == [], out


# --- R23j-2: SWE-bench's applied prediction that `git add -A` refuses ---------------------------------------------

# A .gitattributes that needs no git config (working-tree-encoding), and a file its patch writes as 3 bytes:
# `git apply` (SWE-bench's) writes it as the patch says; `git add -A` must decode it as UTF-16 and dies
ENCODING_PATCH = """diff --git a/.gitattributes b/.gitattributes
new file mode 100644
--- /dev/null
+++ b/.gitattributes
@@ -0,0 +1 @@
+*.txt working-tree-encoding=UTF-16LE
diff --git a/notes.txt b/notes.txt
new file mode 100644
--- /dev/null
+++ b/notes.txt
@@ -0,0 +1 @@
+abc
\\ No newline at end of file
"""


def _swebench_applied(monkeypatch, tmp_path, prediction: str):
    """`to_base` on a tree where SWE-bench's harness applied `prediction` with `git apply --verbose`:
    (status, reason) of the Verdict it raised, or ("taken", the patch it took)."""
    from tests.test_attacks_redteam11 import _verify_module

    verify = _verify_module()
    tree, base, _ = _repo(tmp_path, "[metadata]\nname = thing\n")
    pred = tmp_path / "patch.diff"
    pred.write_text(prediction)
    subprocess.run(["git", "apply", "--verbose", str(pred)], cwd=tree, check=True, capture_output=True)
    here = tmp_path / "harness"
    here.mkdir()
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    monkeypatch.setattr(verify, "HERE", str(here))
    try:
        patch = verify.to_base({"format": "swebench", "base_commit": base, "patch": str(pred)})
    except verify.Verdict as v:
        return v.status, v.reason
    with open(patch) as fh:
        return "taken", fh.read()


def test_r23j_2_a_prediction_git_cannot_stage_is_the_submissions_verdict_not_an_error(monkeypatch, tmp_path):
    """R23j-2: SWE-bench applies the prediction (a .gitattributes naming an encoding, a file not in it); the
    verifier's `git add -A` of that tree dies, and the run was recorded as `error` ("git add failed"): the
    harness's failure, which a reviewer or `--retry-errors` redoes, a free resample. `sweserve run` rejects
    such a tree as `patch_failed` with git's words (submission.diff_tree); so does the export now."""
    status, reason = _swebench_applied(monkeypatch, tmp_path, ENCODING_PATCH)
    assert status == "patch_failed", (status, reason)
    assert "notes.txt" in (reason or ""), reason


def test_r23j_2_control_a_plain_prediction_is_taken(monkeypatch, tmp_path):
    """Control: a prediction git stages is taken as the submission, the tree back at base."""
    plain = ENCODING_PATCH.split("diff --git a/notes.txt")[0].replace(".gitattributes", "README.md").replace(
        "*.txt working-tree-encoding=UTF-16LE", "hello")
    status, patch = _swebench_applied(monkeypatch, tmp_path, plain)
    assert status == "taken" and "+hello" in patch, (status, patch)


# --- R23j-3: a graded test the submission makes skip --------------------------------------------------------------

def test_r23j_3_a_skipped_graded_test_is_read_by_swebench_as_the_failed_run_it_is(tmp_path):
    """R23j-3: the submission's code calls `pytest.skip()` when the F2P test reaches it: sweserve grades the run
    `failed` and printed `SKIPPED <F2P>`, `PASSED <P2P>` and exit code 1. SWE-bench's `get_logs_eval` reads a
    non-zero exit with no FAILED or ERROR line as a log not describing the run: `{}, False`, "patch not
    applied", and then classifies the whole log for an infrastructure fault, where the test output the
    submission printed ("Cannot allocate memory") has the instance flagged `infra_failure` (a broken image, to
    be rerun): a free resample. The log is read as applied, the F2P test not passing."""
    from tests.test_attacks_redteam23e import F2P, _log, _read

    log, _ = _log(tmp_path, "failed", {F2P: "skipped", "tests/test_thing.py::test_other": "passed"},
                  {"resets": []}, "Cannot allocate memory\nKilled")
    applied, status_map, resolution = _read(log)
    assert applied, status_map
    assert status_map.get(F2P) != "PASSED" and resolution == "RESOLVED_NO", (status_map, resolution)
    from swebench.harness.infra_failure import classify_logs

    assert classify_logs(str(log)) is not None  # the words are there: only an unread log would be classified


def test_r23j_3_control_a_failed_and_an_errored_test_keep_their_words(tmp_path):
    """Control: a graded test that failed is FAILED, one that errored ERROR; a resolved run all PASSED."""
    from tests.test_attacks_redteam23e import F2P, P2P, _log, _read

    _, text = _log(tmp_path, "failed", {F2P: "failed", P2P: "error"}, {"resets": []}, "")
    assert f"FAILED {F2P}" in text and f"ERROR {P2P}" in text
    log, text = _log(tmp_path, "resolved", {F2P: "passed", P2P: "passed"}, {"resets": []}, "")
    assert _read(log)[2] == "RESOLVED_FULL"


# --- R23j-4: terminal control sequences in the test output shown after the verdict --------------------------------

def test_r23j_4_test_output_cannot_redraw_the_verdict_a_reviewer_reads(tmp_path):
    """R23j-4: the log SWE-bench keeps (test_output.txt) is read by a reviewer in a terminal (`cat`, `less -R`,
    CI logs). Test output after the verdict was shown as printed: ANSI sequences that move the cursor up and
    erase lines (and a lone \\x1b]... title, a backspace run) redraw the verdict lines as "sweserve: resolved"
    and the FAILED line as PASSED. Shown now with every control character but tab visible as an escape."""
    from tests.test_attacks_redteam23e import F2P, P2P, _log, _read

    forged = ("\x1b[6A\x1b[2K\r" + f"PASSED {F2P}\x1b[K\n\x1b[2K" + "\x1b[3B\x1b[2K\rsweserve: resolved\x1b[K"
              + "\b" * 40 + "\x9b2K\x07\x7f")
    log, text = _log(tmp_path, "failed", {F2P: "failed", P2P: "passed"}, {"resets": []}, forged)
    after = text.split(">>>>> End Test Output", 1)[1]
    controls = [c for c in after if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0]
    assert not controls, controls
    assert "\\x1b[6A" in after  # still there to read, as text
    applied, status_map, resolution = _read(log)
    assert applied and resolution == "RESOLVED_NO", (status_map, resolution)


def test_r23j_4_control_plain_and_unicode_output_is_shown_as_it_was(tmp_path):
    """Control: tabs, non-ASCII text and ordinary lines are shown unchanged behind "| "."""
    from tests.test_attacks_redteam23e import F2P, P2P, _log

    _, text = _log(tmp_path, "failed", {F2P: "failed", P2P: "passed"}, {"resets": []},
                   "col1\tcol2\nnaïve — ✓ passed\nE   assert 1 == 2")
    assert "| col1\tcol2\n| naïve — ✓ passed\n| E   assert 1 == 2" in text
