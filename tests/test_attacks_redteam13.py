"""A thirteenth red team's attacks on the newest defences: self-selected retries of the API agent (`agents/api.py`:
`tool_server_lost`, `model_refused`), the SWE-bench export's verifier (`harness/sweserve_verify.py`: every
untracked file in the submission), and the assessment terminal's key queue (`assess/recorder.py`).

Each test asserts the defended behaviour: it FAILS while the attack wins. R13-1 and R13-2 run a scripted model on
127.0.0.1 and the real sandbox, as tests/test_attacks_retries.py does; R13-3 runs SWE-bench's real harness on the
demo export, as tests/test_attacks_redteam12b.py does; R13-4 a real pty and bash, no Docker.

- R13-1 WIN (self-selected retry, every run; an honest model's slip is an `internal` error too): the API agent
  reads a bash call's `command` as whatever JSON the model wrote (`json.loads(arguments)["command"]`) and hands
  it to swe-rex's `BashAction`, a pydantic model with `command: str`. A model that writes `{"command": 5}` or
  `{"command": null}` (OpenAI-compatible endpoints do not hold arguments to the tool's schema unless asked to)
  raises a pydantic `ValidationError` (a `ValueError`), which none of `solve`'s handlers catch; a tool call whose
  `function` is a string, not an object, raises `AttributeError` at `fn.get`. Either escapes the agent: the
  trial is `error` of kind `internal` and `run --retry-errors` redoes it, the fix made before never graded. An
  agent that doubts its fix ends its attempt as an error by one malformed tool call, at will: the door 7f32149
  closed for a killed tool server and a refused conversation. Measured: 3 of 3 variants, every run.
  `test_a_malformed_tool_call_is_the_attempts_own_doing_not_a_redone_error`.
- R13-2 WIN (self-selected retry, every run): `tool_server_lost` holds only while `_runs_commands(box)`, i.e.
  `box.exec("true")` exits 0, and `exec` runs `timeout -s KILL N bash -c ...`. The agent is root in its sandbox:
  `mv /usr/bin/timeout /usr/bin/timeout.gone; pkill -9 -f swerex-remote`. The liveness check fails, the run is
  `error` (`agent: tool server: ServerDisconnectedError`, kind `agent`) and `--retry-errors` redoes it; the fix
  made before is never graded, though the tree is still copied out (dockerd's archive, no exec). Removing bash,
  or exhausting the pids limit, are the same door.
  `test_a_tool_server_killed_by_an_agent_that_broke_exec_is_not_a_redone_error`.
- R13-3 WIN (SWE-bench export grades what is in no submission; `sweserve run` would fail it): the task image's
  `.git/info/exclude` holds `__pycache__/`, `*.pyc` and `.pytest_cache/` besides the install's own paths. The
  verifier's submission is `git add -A` plus `untracked()`, both reading that file, so a prediction's `.pyc` is
  never in it; its resets (`git clean -qfd`, no `-x`, and `untracked()`) never remove it either, and it is not in
  `leftovers` once the submission is the tree's own diff. A prediction whose every `.py` is at base, holding the
  oracle's fix as an unchecked hash-based `.pyc` (PEP 552: Python never compares it with its source) in
  `python/sglang/srt/sampling/__pycache__/` (a git binary patch: SWE-bench's `git apply` applies it) plus a
  NOTES.md, is RESOLVED by SWE-bench's real harness; the verifier prints `{"resets": [], "tampered": []}`.
  `sweserve run` leaves `__pycache__` out of its copy, so the same tree fails there. Beyond the fix, the same hides
  code from the reviewer (a binary blob) and from every reset keyed on file names.
  `test_a_predictions_pyc_is_no_hidden_part_of_the_swebench_submission`; the control, NOTES.md alone is not
  resolved (passes): `test_control_the_same_prediction_without_its_pyc_is_not_resolved`.
- R13-4 WIN (the record lies): `BrowserTerminal.write` records every key (cast `i` event,
  `TerminalRecord.typed`) before the 1 MB queue decides to drop it; the drop leaves one `m` marker, the first
  time only, which `commands_from_cast` ignores. While a foreground `sleep` reads nothing, the candidate sends one
  message of comment lines as long as the queue holds less the head of a command, then that head (`cat
  .../answer-`, queued to the byte), then a decoy (`decoy-`, dropped), then, once the queue drained, the rest
  (`key.txt` Enter). bash runs `cat .../answer-key.txt` (its content is on screen); the commands typed list
  shows `cat .../answer-decoy-key.txt` and nothing saying keys were dropped. Measured: every run, with the cap
  scaled to 200 kB and with the real 1 MiB.
  `test_keys_the_terminal_dropped_are_not_listed_as_typed_into_a_command`.

Fixed since (each test here failed before its fix, as the red team ran them at dacf06c):
- R13-1: `api._call` reads a tool call of any shape: a call, a function or arguments that are not what the tool's
  schema says, or a `command` that is not a string, is answered with an error message and the run goes on.
  The endpoint's own answer is checked too: a `message` that is not an object is a `ModelError`, a token count
  that is not a number counts 0.
- R13-2: `tool_server_lost` holds while the host reaches the sandbox through dockerd's archive (`api._sandbox_there`:
  a file of a random name read from outside), not through a process inside it.
- R13-3: the export verifier's `untracked()` keeps only the image's own files, the paths its info/exclude lists
  one by one, never its patterns: a prediction's `.pyc` (any bytecode, any `__pycache__`) is removed before the
  tests run, and is no part of the submission, as in `sweserve run`.
- R13-4: a key the terminal's queue drops is never recorded as typed: each drop is a marker of its own
  (`⟨6 bytes dropped⟩` in the commands typed list, no edit applied after it).
- The lead on the next task's id: `/api/state` serves it only while its clock runs, as the title and statement.

Leads, not reproduced:
- A conversation the endpoint answers slowly because of what the sandbox returned (a long context taking past
  `request_timeout_s`) ends as `model API timed out` (status None): `error`, redone. So does a 5xx or 429 a
  provider gives for an overlong prompt instead of a 400/413/422. Both depend on the provider.
- `usage.prompt_tokens` that is not a number (`int("x")`), or a `message` that is not an object, escapes as an
  internal error too: the endpoint's answer, not the agent's, unless a proxy echoes what the agent wrote.
- R13-3's wider use: a sourceless `.pyc` beside the hidden tests (`test/srt/<module>.pyc`; pytest's prepend
  import mode puts that folder first on sys.path) would shadow a module the tests import without any `.py` the
  verifier's module-name resets look at. Not built.
- /api/state still serves the next task's `task_id` (owner__repo-PR) before its clock starts: the upstream PR
  can be looked up during the image build. The title and instruction are hidden (R12a-5's fix).

Looked at, no finding: `Selection.merge`/`attempts_for` (per-task attempts; `report --tasks` merges a selection
of 1 attempt, which max() leaves alone); `DockerSandbox.kill` before `copy_tree` (a process left running is dead
before the archive is read; the deadline's `_kill` skips the checkout); `export_tree`'s `tarfile.TarError` now an
`InfraError('docker')` (a kind --retry-errors still redoes, but the kill removes the writer); the verifier's
`inside()` (`realpath` of the folder) and `git_file()` (rmtree of a `.git` dir, never following a link);
`pack_attempts` (attempts keyed by number: a retake under the same number in a second results file would replace
the first; no path writes that); the Rasch fit's OWN_ERRORS.
"""

from __future__ import annotations

import time

import pytest
from fake_model import tool_call
from test_attacks_redteam12a import bash_beside_a_key
from test_attacks_redteam12b import _new_file, _swebench_log, exported_image  # noqa: F401 - fixture
from test_attacks_retries import FIX, _run
from test_export import DECODING, decoding_image, swebench_export  # noqa: F401 - fixtures

from sweserve.assess.recorder import commands_from_cast

pytestmark = pytest.mark.docker


BAD_CALL = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c2", "type": "function", "function": "bash"}]}


@pytest.mark.parametrize("bad", [
    tool_call("bash", {"command": 5}, "c2"),
    tool_call("bash", {"command": None}, "c2"),
    BAD_CALL,
], ids=["command-int", "command-null", "function-not-object"])
def test_a_malformed_tool_call_is_the_attempts_own_doing_not_a_redone_error(demo, tmp_path, bad):
    r, redo = _run(demo, tmp_path, [FIX, bad, tool_call("submit", {}, "c3")])
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert redo == []


# the agent (root in its sandbox) breaks what the liveness check runs, then kills its tool server
BREAK_EXEC_THEN_KILL = tool_call("bash", {"command": "mv /usr/bin/timeout /usr/bin/timeout.gone; "
                                                      "pkill -9 -f swerex-remote; sleep 5"}, "c2")


def test_a_tool_server_killed_by_an_agent_that_broke_exec_is_not_a_redone_error(demo, tmp_path):
    r, redo = _run(demo, tmp_path, [FIX, BREAK_EXEC_THEN_KILL])
    assert r.status == "resolved", (r.status, r.error_kind, r.agent_run.exit_reason, r.reason)
    assert redo == []


# --- R13-3: a prediction's .pyc is neither in the SWE-bench verifier's submission nor removed by its resets --------

SAMPLER = "python/sglang/srt/sampling/sampler.py"
SAMPLER_PYC = "python/sglang/srt/sampling/__pycache__/sampler.cpython-311.pyc"


def _pyc_only_fix(tmp_path, image: str, oracle: str) -> str:
    """The oracle's fix as an unchecked hash-based .pyc (PEP 552: Python never compares it with its source) beside
    base's untouched sampler.py, plus a one-line NOTES.md so the tree differs from base visibly; a git binary patch,
    which SWE-bench's `git apply` applies."""
    import py_compile
    import subprocess as sp

    work = tmp_path / "forge"
    work.mkdir()
    src = work / SAMPLER
    src.parent.mkdir(parents=True)
    src.write_bytes(sp.run(["docker", "run", "--rm", "--entrypoint", "cat", image, f"/testbed/{SAMPLER}"],
                           check=True, capture_output=True).stdout)
    sp.run(["patch", "-p1", "-s"], input=oracle.encode(), cwd=work, check=True)
    repo = tmp_path / "pred"
    sp.run(["git", "init", "-q", str(repo)], check=True)
    (repo / SAMPLER_PYC).parent.mkdir(parents=True)
    py_compile.compile(str(src), cfile=str(repo / SAMPLER_PYC), dfile=f"/testbed/{SAMPLER}", doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    (repo / "NOTES.md").write_text("notes\n")
    sp.run(["git", "-C", str(repo), "add", "-f", "."], check=True)
    return sp.run(["git", "-C", str(repo), "diff", "--cached", "--binary"], check=True, capture_output=True,
                  text=True).stdout


@pytest.mark.slow
def test_a_predictions_pyc_is_no_hidden_part_of_the_swebench_submission(exported_image, swebench_export,  # noqa: F811
                                                                        tmp_path):
    """SWE-bench's real run_evaluation on the export. The prediction leaves every .py at base: its fix is bytecode
    only. `sweserve run` grades no __pycache__ (its copy leaves them out) and the verifier's own submission, its
    `git add -A` (excludes `*.pyc`, `__pycache__/`) plus `untracked()` (the same excludes), never holds it; its
    resets (`git clean -qfd`, `untracked()`) never remove it either, so the graded tests import it."""
    from test_export import TASKS

    oracle = (TASKS / DECODING / "oracle.patch").read_text()
    prediction = _pyc_only_fix(tmp_path, exported_image, oracle)
    assert "GIT binary patch" in prediction and ".py\n" not in prediction.replace(".pyc", "")
    resolved, text = _swebench_log(tmp_path, swebench_export, "pyc-only", prediction)
    assert not resolved, text[text.find(">" * 5 + " Start"):][:3000]


@pytest.mark.slow
def test_control_the_same_prediction_without_its_pyc_is_not_resolved(exported_image, swebench_export,  # noqa: F811
                                                                     tmp_path):
    """The control for R13-3 (passes at dacf06c): NOTES.md alone fixes nothing."""
    resolved, _ = _swebench_log(tmp_path, swebench_export, "notes-only", _new_file("NOTES.md", "notes\n"))
    assert not resolved


# --- R13-4: keys the terminal dropped are in the commands typed as if they ran --------------------------------------

def test_keys_the_terminal_dropped_are_not_listed_as_typed_into_a_command(tmp_path, monkeypatch):
    """`BrowserTerminal.write` records every key (cast `i` event, `TerminalRecord.typed`) before the 1 MB queue
    decides to drop it; the drop leaves one `m` marker, the first time only, which `commands_from_cast` ignores.
    A candidate fills the queue while a foreground `sleep` reads nothing (one message of comment lines, as long
    as the queue holds less 7 bytes), queues the head of a command, types a decoy that is dropped, and types the
    rest once the queue drained: the shell runs `cat .../answer-key.txt`, the reviewer's list shows
    `cat .../answer-decoy-key.txt`, with no word that anything typed was dropped."""
    import sweserve.assess.recorder as recorder

    monkeypatch.setattr(recorder, "INPUT_PENDING_BYTES", 200_000)  # 1 MiB scaled down; the same with 1 MiB
    head, decoy, tail = f"cat {tmp_path}/answer-".encode(), b"decoy-", b"key.txt\r"
    _, cast, term, shown = bash_beside_a_key(tmp_path)
    try:
        time.sleep(0.5)
        term.write(b"sleep 3\r")
        time.sleep(0.5)
        # each queued message is charged a fixed cost beside its bytes (red team 20b, R20b-1): two are queued
        room = recorder.INPUT_PENDING_BYTES - len(head) - 2 * getattr(recorder, "QUEUED_ITEM_COST", 0)
        junk = (b"#" + b"x" * 998 + b"\n") * (room // 1000)
        junk += b"#" * (room - len(junk) - 1) + b"\n"
        term.write(junk)  # held: sleep reads nothing, the pty takes a few KB of it
        term.write(head)  # fills the queue to the byte
        term.write(decoy)  # dropped
        deadline = time.monotonic() + 30
        while term._pending and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        term.write(tail)
        time.sleep(1.0)
        term.write(b"exit\r")
        term.exited.wait(10)
    finally:
        term.stop()
    assert term.dropped == len(decoy)
    assert "SECRET-CONTENT-42" in b"".join(shown).decode(errors="replace")  # cat answer-key.txt ran
    typed = [c for _, c in commands_from_cast(cast) if not c.startswith("#")]
    typed = [c.replace(str(tmp_path), "<tmp>") for c in typed]
    # the reviewer's list names what ran, or at least says that keys typed into it never reached the shell
    assert any(c.endswith("<tmp>/answer-key.txt") for c in typed) or any("drop" in c for c in typed), typed
