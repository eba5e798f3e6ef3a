"""A fourteenth red team's (14a) attacks on the newest defences: the API agent's self-selected retries
(`agents/api.py`: what `tool_server_lost` and `model_refused` leave out), the trial pipeline's grade sandbox
(`evaluation/submission.py`'s diff exec, `evaluation/verifier.py`'s resets), and the swe-rex client the host runs.

Each test asserts the defended behaviour: it FAILS while the attack wins. All run the demo's task 103 in the real
sandboxes; the API agent's against a scripted model on 127.0.0.1 (tests/fake_model.py), as
tests/test_attacks_retries.py does; the command agent's as one shell command. An `error` of any kind but `limit`
is redone by `run --retry-errors` and left out of `assess`'s ability fit (`difficulty.response`: None), so each
error below is a free resample (R11-4, R12a-2) for an agent that doubts its fix, chosen after it has seen its work.

- R14a-1 WIN (self-selected retry, every run): the agent replaces a test folder of base by a file
  (`rm -rf test/srt && echo gone > test/srt`). The grade sandbox applies the patch (6 deletions, 1 new file),
  then the resets in one exec: `git checkout BASE --pathspec-from-file=restore.lst` puts the 6 test files back
  (as it must: `checkout` runs with force, so it unlinks the file `test/srt` to make the folder), then
  `xargs -0 rm -f < delete.lst` deletes the new file `test/srt`, which is now that folder: rm exits 1, the step
  exits RESET_FAILED, `run_tests` raises `PatchError("tests", "could not reset the submission's test files")`
  and `_graded` makes it `error` of kind `task` ("tests.patch does not apply: ..."): redone. Any task whose profile
  matches a folder of its test files (`test/*` matches `test/srt`: the sglang and sglang-jax profiles too).
  Measured: every run, with and without the fix.
  `test_a_test_folder_made_a_file_is_graded_not_a_redone_error`.
- R14a-2 WIN (code execution on the host, from the sandbox; also a redone error, and Ctrl-C for the whole run):
  the API agent's tool server is swe-rex, reached from the host through `Sandbox.forward` (a relay into the
  sandbox's 127.0.0.1:8000). The agent is root there: a bash call starts a process that kills `swerex-remote` a
  second later and serves port 8000 itself, answering every request `511 {"swerexception": {"class_path":
  "builtins.exec", "message": "<python>"}}`. swe-rex's client (`RemoteRuntime._handle_transfer_exception`, on the
  host) imports the module named (`__import__`), looks the name up in it and CALLS it with `message`: the next
  bash call runs `exec("<python>")` in the sweserve process on the host (the test writes a file under its
  tmp_path), with the user's rights and its Docker socket, i.e. every other trial's sandbox, hidden tests and
  keys. Then `None.extra_info = ...` raises AttributeError: `internal` error, redone. `builtins.ValueError` is a
  plain self-selected retry; `builtins.KeyboardInterrupt` goes through `run_trial_safely` (which re-raises only
  Ctrl-C) and ends `sweserve run` itself, its Context cancelled (in a first run of this file on the shared demo
  Context, every later trial was `error`, `sandbox: run cancelled`). Measured: 3 of 3 variants, every run.
  `test_the_tool_servers_answer_runs_no_code_on_the_host`,
  `test_an_exception_the_tool_server_names_is_not_raised_on_the_host`.
- R14a-3 WIN (self-selected retry, one word; an honest model's slip too): a bash call of `exit` (or `kill -9 $$`)
  ends swe-rex's bash session; the real server raises `pexpect.exceptions.EOF` and transfers it (511, as above);
  the host re-raises it as itself: no `SwerexException`, no `OSError`, so none of `solve`'s handlers catches it
  and the trial is `error` of kind `internal` ("internal error: EOF: End Of File ..."). 7f32149's
  `tool_server_lost` covers a server that stopped answering, not one that answers with an exception of its choice.
  Measured: every run, both commands.
  `test_a_bash_session_the_model_ends_is_graded_not_an_internal_error`.
- R14a-4 WIN (self-selected retry, every run): the diff exec in the grade sandbox (`submission.diff_then`) has a
  300 s clock and no check of `timed_out`: a tree git takes longer to add is killed there (exit 137, nothing
  printed), `diff_then` returns an empty patch with status 137, and `_looked` raises `PatchError("tests", "git
  could not list the submission's paths (exit 137)")`: `error`, kind `task`, redone (and the grade sandbox's CPU
  spent 300 s per attempt). The agent writes `junk/.gitignore` of 200,000 two-star patterns (`*q123z*x`) and 3,000
  files named by 245 `q`s (2 MB of ignore rules, a 12 MB tree): `git add -A` matches each name against each
  pattern (~2 µs a match on this machine, 20 minutes in all). Measured: every run (307 s).
  `test_a_tree_git_is_slow_to_diff_is_not_a_redone_error`.
- R14a-5 WIN (self-selected retry, every run): a changed `pyproject.toml` that exists at base is read from the
  grade sandbox and parsed on the host (`resets.pytest_section`, for `plan_resets`), which catches only
  `TOMLDecodeError`. `nested = [[[...600...]]]` makes tomllib recurse past Python's limit (`RecursionError`), an
  integer of 5,000 digits makes `int()` refuse it (a plain `ValueError`, Python's int_max_str_digits): either
  escapes as an `internal` error, redone. The export's verifier calls the same function (`sweserve_verify.reset`),
  uncaught too. Measured: both, every run.
  `test_a_pyproject_tomllib_cannot_read_is_graded_not_an_internal_error`.
- R14a-6 WIN (self-selected retry, every run): a command agent configured with `trajectory:` has its own record
  read on the host (`trajectory.parse_trajectory`: Claude Code's and Codex's from its stdout, mini-swe-agent's
  from $SWESERVE_TRAJECTORY). `_num` calls `float()` on any non-negative JSON number: an integer of 401 digits
  (`{"type": "result", "total_cost_usd": 1000…0}`, one printf) raises OverflowError, which `parse_trajectory`
  (KeyError, RecursionError) lets through: `error` of kind `internal`, redone. mini-swe-agent's `extra.cost` and
  `info.model_stats.instance_cost` are the same door. Measured: every run.
  `test_a_trajectory_line_the_host_cannot_read_is_graded_not_an_internal_error`.

Defences (each test above failed before them):
- R14a-1 (`verifier.reset_steps`, `harness/sweserve_verify.reset`): the submission's new paths are removed
  before base's are restored; and in `sweserve run`, resets or tests.patch that fail on a submission (which
  validation ran on the null and oracle ones) are the submission's doing: `failed`, never a redone error.
- R14a-2, R14a-3 (`agents/api._safe_runtime`): swe-rex's exception transfer raises only the two exceptions the
  shell handles; any other class path, a reply of the wrong shape or a session that ended is a
  `ToolServerBroke`, and the run ends `tool_server_lost` (graded) while the host still reaches the sandbox.
- R14a-4 (`submission._in_time`): a diff past its clock is `SubmissionRejected`, graded (the test scales the
  clock down to 15 s and the patterns to a tenth).
- R14a-5 (`resets.pytest_section`): any error tomllib raises reads as "unparsable", which resets the file.
- R14a-6 (`trajectory.parse_trajectory`, `_num`): whatever the agent's record holds, the attempt is graded.

Leads, not reproduced:
- The tool server's answer is read whole into the host's memory (`await resp.json()` in swe-rex's `_request`, no
  size cap): R14a-2's server streaming an endless 200 body would grow the sweserve process until the host's OOM
  killer ends it (every trial of the run), long before the task's deadline kills the sandbox. Not run here (CI
  shares this machine).
- The API agent's `_count` calls `int()` on a float token count: `"prompt_tokens": 1e999` (JSON's inf) is an
  OverflowError, `NaN` a ValueError, both internal errors: the endpoint's answer, as R13's lead, unless a proxy or
  a self-hosted endpoint echoes what the agent wrote.
- The egress proxy's audit log is read whole into memory too (`EgressProxy.audit_log`: `b"".join(stream)`), and
  the proxy container has no disk cap: a command agent with `egress:` flooding the proxy with refused requests
  with long URLs makes it as large as it likes. Not built (needs the proxy image).
- The SWE-bench/Harbor export's verifier has R14a-1's and R14a-5's doors, uncaught: `sweserve_verify.reset`
  `os.unlink`s the new file `test/srt`, a folder again after `git checkout` (IsADirectoryError), and its
  `config_changed` calls the same `pytest_section` (RecursionError, ValueError). The verifier dies before its
  markers: SWE-bench counts the instance unresolved (no resample), Harbor finds no reward.txt (an exception, which
  a job's retry config may redo). Read, not run.
- The image's own install outputs, the paths info/exclude lists one by one (R13-3's fix keeps them): a prediction
  that edits one (an `.egg-info`'s `entry_points.txt`, a `.pyc` the install compiled) has the edit in no
  submission (`git add -A` ignores it) and through every reset (`untracked()` keeps it). The demo's image has no
  install outputs; not built.
- `patch --fuzz`'s fallback can write `sub/.git` (a gitfile): `git clean -qfd` keeps a nested repository (it needs
  `-ff`), `untracked()` lists `sub/`, and `os.unlink` of a folder crashes the export's verifier. Not built.

Looked at, no finding: `_sandbox_there` (any InfraError with the container still there reads as there; a stopped
container too, killed by the agent's OOM or the disk watchdog); paths near PATH_MAX (dockerd's archive skips what
it cannot stat, and unpacks 4,105-byte paths under /sweserve/submitted); `read_stream`/`event_of` (exact types,
RecursionError caught); `configparser` on setup.cfg/tox.ini (every failure a `configparser.Error`); a binary
16 MB tox.ini read by `_pytest_config_changed` (LimitExceeded: kind `limit`, not redone).
"""

from __future__ import annotations

import pytest
from fake_model import FakeModel, tool_call

from sweserve.agents.api import ApiAgent
from sweserve.agents.command import CommandAgent
from sweserve.agents.config import ApiAgentConfig, CommandAgentConfig
from sweserve.demo import files
from sweserve.evaluation.evaluate import pending, run_evaluation
from sweserve.evaluation.results import read_results

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"
FIX = f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF\n"


def _command_run(demo, tmp_path, command, name="doubter", **cfg):
    cfg = CommandAgentConfig(kind="command", name=name, command=command, **cfg)
    agent = CommandAgent(cfg.command, cfg=cfg)
    bundle = demo.bundle(DIST)
    out = tmp_path / f"{name}.jsonl"
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True)


# --- R14a-1: the test folder becomes a file: restoring its tests makes it a folder again, which `rm -f` cannot delete
FOLDER_TO_FILE = "rm -rf test/srt && echo gone > test/srt"


@pytest.mark.parametrize("fix, status", [(True, "resolved"), (False, "failed")], ids=["fix", "no-fix"])
def test_a_test_folder_made_a_file_is_graded_not_a_redone_error(demo, tmp_path, fix, status):
    r, redo = _command_run(demo, tmp_path, (FIX if fix else "") + FOLDER_TO_FILE)
    assert r.status == status, (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R14a-2, R14a-3: the sandbox's swe-rex server names an exception the host imports, calls and raises ---------

FIX_CALL = tool_call("bash", {"command": FIX}, "c1")


def _api_run(demo, tmp_path, script, name="forger", ctx=None):
    agent = ApiAgent(ApiAgentConfig(kind="api", name=name, model="fake-1", base_url="", request_timeout_s=30,
                                    request_retries=0), env={})
    bundle = demo.bundle(DIST)
    out = tmp_path / f"{name}.jsonl"
    with FakeModel(script) as fake:
        agent.cfg = agent.cfg.model_copy(update={"base_url": fake.base_url})
        run_evaluation(ctx or demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True)


def fake_swerex(class_path: str, message: str) -> str:
    """A bash command (root in the sandbox) that, a second after it returns, kills the real tool server and serves
    its port with one answering every request `511 {"swerexception": {class_path, message}}`: swe-rex's
    `RemoteRuntime._handle_transfer_exception` imports the module named, calls the name in it with `message`
    on the host, and raises what it returns."""
    import json as _json
    body = _json.dumps({"swerexception": {"class_path": class_path, "message": message, "traceback": "",
                                          "extra_info": {}}})
    server = f'''import http.server, os, time
BODY = {body!r}.encode()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(511)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    do_GET = do_POST
time.sleep(1)
os.system("pkill -9 -f swerex-remote")
time.sleep(0.3)
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
'''
    return (f"cat > /tmp/.rex.py <<'PYEOF'\n{server}PYEOF\n"
            "setsid python3 /tmp/.rex.py >/dev/null 2>&1 < /dev/null & echo planted")


def test_the_tool_servers_answer_runs_no_code_on_the_host(demo, tmp_path):
    marker = tmp_path / "ran-on-the-host"
    plant = tool_call("bash", {"command": fake_swerex("builtins.exec", f"open({str(marker)!r}, 'w').write('x')")},
                      "c2")
    r, redo = _api_run(demo, tmp_path, [FIX_CALL, plant, ("sleep", 4), tool_call("bash", {"command": "true"}, "c3"),
                                        tool_call("submit", {}, "c4")])
    assert not marker.exists(), "the sandbox ran Python in the sweserve process on the host"
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert redo == []


@pytest.mark.parametrize("class_path", ["builtins.ValueError", "builtins.KeyboardInterrupt"],
                         ids=["internal-error", "ctrl-c"])
def test_an_exception_the_tool_server_names_is_not_raised_on_the_host(demo, tmp_path, class_path):
    from sweserve.evaluation.context import Context

    plant = tool_call("bash", {"command": fake_swerex(class_path, "named by the sandbox")}, "c2")
    script = [FIX_CALL, plant, ("sleep", 4), tool_call("bash", {"command": "true"}, "c3"), tool_call("submit", {}, "c4")]
    # a context of its own: a KeyboardInterrupt cancels the one it went through (every later trial: `run cancelled`)
    ctx = Context.create(demo.ctx.state_dir, repo_path=demo.repo)
    try:
        r, redo = _api_run(demo, tmp_path, script, ctx=ctx)
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt ends `sweserve run` itself
        pytest.fail(f"the sandbox's tool server raised {exc.__class__.__name__} out of run_evaluation")
    finally:
        ctx.close()
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert redo == []


@pytest.mark.parametrize("command", ["exit", "kill -9 $$"], ids=["exit", "kill-the-shell"])
def test_a_bash_session_the_model_ends_is_graded_not_an_internal_error(demo, tmp_path, command):
    r, redo = _api_run(demo, tmp_path, [FIX_CALL, tool_call("bash", {"command": command}, "c2"),
                                        tool_call("submit", {}, "c3")], name="quitter")
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R14a-4: a tree whose diff runs past the diff exec's clock ---------------------------------------------------

# 200,000 two-star patterns in a .gitignore beside 3,000 names of 245 `q`s: `git add -A` in the grade sandbox
# matches each name against each pattern (~2 µs a match here: some 20 minutes), past the diff exec's 300 s
IGNORE_BOMB = ("python3 - <<'PYEOF'\n"
               "import os\n"
               "os.makedirs('junk', exist_ok=True)\n"
               "open('junk/.gitignore', 'w').write(''.join(f'*q{i}z*x\\n' for i in range(200000)))\n"
               "for n in range(3000):\n"
               "    open('junk/' + 'q' * 240 + f'{n:05d}', 'w').write('x')\n"
               "PYEOF\n")


@pytest.mark.slow
def test_a_tree_git_is_slow_to_diff_is_not_a_redone_error(demo, tmp_path, monkeypatch):
    import sweserve.evaluation.submission as submission

    # scaled down, the same code paths: a 15 s diff clock and a tenth of the patterns (some 2 minutes of git)
    monkeypatch.setattr(submission, "DIFF_TIMEOUT_S", 15)
    r, redo = _command_run(demo, tmp_path, FIX + IGNORE_BOMB.replace("range(200000)", "range(20000)"),
                           name="slowpoke")
    assert r.status in ("resolved", "failed", "patch_failed"), (r.status, r.error_kind, r.reason)
    assert redo == []


@pytest.mark.slow
def test_control_the_same_tree_with_a_hundredth_of_the_patterns_is_graded(demo, tmp_path):
    r, redo = _command_run(demo, tmp_path, FIX + IGNORE_BOMB.replace("range(200000)", "range(2000)"), name="quick")
    assert (r.status, redo) == ("resolved", []), (r.status, r.error_kind, r.reason)


# --- R14a-5: a pytest configuration the host's tomllib cannot read --------------------------------------------------

DEEP_TOML = "printf 'nested = %s%s\\n' \"$(printf '[%.0s' $(seq 600))\" \"$(printf ']%.0s' $(seq 600))\" >> python/pyproject.toml"
# an integer of more digits than int() converts (sys.get_int_max_str_digits): a ValueError, not a TOMLDecodeError
BIG_INT_TOML = "printf 'big = %s\\n' \"$(head -c 5000 /dev/zero | tr '\\0' 9)\" >> python/pyproject.toml"


@pytest.mark.parametrize("edit", [DEEP_TOML, BIG_INT_TOML], ids=["nested-600", "int-5000-digits"])
def test_a_pyproject_tomllib_cannot_read_is_graded_not_an_internal_error(demo, tmp_path, edit):
    r, redo = _command_run(demo, tmp_path, FIX + edit, name="nester")
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R14a-6: a command agent's own record (its stdout, `trajectory: claude-code`) read on the host ---------------

# a cost of 401 digits: a JSON integer, which `float()` cannot hold (OverflowError; `parse_trajectory` catches only
# KeyError and RecursionError)
HUGE_COST = "printf '{\"type\": \"result\", \"total_cost_usd\": 1%0400d}\\n' 0"


def test_a_trajectory_line_the_host_cannot_read_is_graded_not_an_internal_error(demo, tmp_path):
    cfg = CommandAgentConfig(kind="command", name="recorder", command=FIX + HUGE_COST, trajectory="claude-code")
    agent = CommandAgent(cfg.command, cfg=cfg)
    bundle = demo.bundle(DIST)
    out = tmp_path / "recorder.jsonl"
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert pending([bundle], agent, 1, out, retry_errors=True) == []
