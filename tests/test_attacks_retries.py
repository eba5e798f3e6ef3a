"""Self-selected retries: an attempt that ends itself as an `error` is redone by `run --retry-errors`.

Errors count as not resolved, but `--retry-errors` redoes them (an API outage must not cost an agent its task). An
agent that can end its own attempt as an error whenever it doubts its fix is scored only on the attempts it trusts:
a per-attempt solve rate q becomes 1 - (1 - q)^retries, a free pass@k reported as pass@1 (red team 11's lead; R11-4
closed the same door for limits). The API agent had two such doors, each reproduced here against a scripted model
on 127.0.0.1 and the real sandbox:

- it kills its own tool server (`pkill swerex-remote`, it is root in the sandbox): the next step broke with
  `tool server: ServerDisconnectedError`, an `error` of kind `agent`;
- it makes the endpoint refuse the conversation (an observation that overruns the context window gives a 400
  `context_length_exceeded`): `HTTP 400 from model API`, an `error` of kind `agent`.

Any agent had a third: a process it leaves running that rewrites a file while the tree is copied out (truncating
it, in a folder the copy leaves out, `__pycache__`): the daemon's archive stream broke off, `tarfile.ReadError`
escaped as an `internal` error, and `--retry-errors` redid it (2 of 3 copies broke in a first measurement; the
test's agent breaks every one it races).

Defence (`agents/api.py`): neither is an error. The run ends (`tool_server_lost` when the sandbox still runs
commands; `model_refused` for a 400, 413 or 422 after a first answer) and the tree is graded as it stands, as at a
step limit: a fix made before is `resolved`, none is `failed`, and `--retry-errors` has nothing to redo. What the
attempt cannot have caused stays an error and is redone: a refusal of the first request (a bad key or model name),
an endpoint that is down (tests/test_agents_docker.py), a sandbox that is gone.
Defence (`evaluation/trial.py`, `environment/transfer.py`): the candidate's sandbox is killed from the host
(`Sandbox.kill`) when its agent stops, before its tree is copied, so nothing it left running writes during the
copy; an archive the daemon still breaks off is the machinery's (`InfraError`), never an internal error.
Each test failed before the defence (the first result was `error` and `pending(..., retry_errors=True)` redid it).
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
FIX = tool_call("bash", {"command": f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF"})
KILL_TOOL_SERVER = tool_call("bash", {"command": "pkill -9 -f swerex-remote; sleep 5"})


def _run(demo, tmp_path, script, fail_when=None, request_retries=0):
    agent = ApiAgent(ApiAgentConfig(kind="api", name="doubter", model="fake-1", base_url="", request_timeout_s=2,
                                    request_retries=request_retries), env={})
    bundle = demo.bundle(DIST)
    out = tmp_path / "doubter.jsonl"
    with FakeModel(script, fail_when=fail_when) as fake:
        agent.cfg = agent.cfg.model_copy(update={"base_url": fake.base_url})
        run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True)


@pytest.mark.parametrize("script, ends, status", [
    ([KILL_TOOL_SERVER], "tool_server_lost", "failed"),
    ([FIX, KILL_TOOL_SERVER], "tool_server_lost", "resolved"),
    ([tool_call("bash", {"command": "true"}), ("status", 400)], "model_refused", "failed"),
    ([FIX, ("status", 413)], "model_refused", "resolved"),
], ids=["kill-tool-server", "fix-then-kill-tool-server", "refused-conversation", "fix-then-refused-conversation"])
def test_an_attempt_that_ends_itself_is_graded_not_redone(demo, tmp_path, script, ends, status):
    r, redo = _run(demo, tmp_path, script)
    assert (r.status, r.agent_run.exit_reason, r.agent_run.error) == (status, ends, None), r.reason
    assert redo == []


# an observation the endpoint fails on (OVER1RUN is in no command's text, only in what the sandbox printed): a
# provider that times out or answers 5xx/429 for a context grown too long (red team 13's lead)
OVERRUN = tool_call("bash", {"command": "echo OVER$((1))RUN"})
FINE = {"role": "assistant", "content": "thinking"}


@pytest.mark.parametrize("script, failure, status", [
    ([OVERRUN, FINE], ("status", 503), "failed"),
    ([FIX, OVERRUN, FINE], ("status", 500), "resolved"),
    ([FIX, OVERRUN, FINE], ("status", 429, {"Retry-After": "0"}), "resolved"),
    ([FIX, OVERRUN, FINE], ("sleep", 5), "resolved"),
], ids=["503", "fix-then-500", "fix-then-429", "fix-then-time-out"])
def test_a_conversation_the_endpoint_fails_on_is_graded_when_it_still_answers(demo, tmp_path, script, failure,
                                                                             status):
    """A time-out, 5xx or 429 after a first answer is a failure of the conversation, not of the endpoint, when
    the endpoint still answers the run's first request: the tree is graded (`model_refused`), never redone.
    Without `_endpoint_answers` each was an `error` of kind `agent`, and `--retry-errors` redid it."""
    r, redo = _run(demo, tmp_path, script, fail_when=("OVER1RUN", failure))
    assert (r.status, r.agent_run.exit_reason, r.agent_run.error) == (status, "model_refused", None), r.reason
    assert redo == []


def test_a_conversation_that_spends_the_rate_limit_is_graded_not_redone(demo, tmp_path):
    """An agent spends the endpoint's tokens for the minute on purpose (a context it made huge): its request and,
    asked at once, the probe both got 429, and the attempt was an `error`, redone (red team 14's lead). The probe
    now waits what the 429 asked for (Retry-After, 3 s here): the endpoint answers it, and the tree is graded."""
    r, redo = _run(demo, tmp_path, [FIX, OVERRUN, FINE],
                   fail_when=("OVER1RUN", ("status", 429, {"Retry-After": "3"}), 3))
    assert (r.status, r.agent_run.exit_reason, r.agent_run.error) == ("resolved", "model_refused", None), r.reason
    assert redo == []


def test_an_endpoint_down_after_a_first_answer_is_the_machinerys_error_and_is_redone(demo, tmp_path):
    r, redo = _run(demo, tmp_path, [FIX, ("status", 503)])
    assert (r.status, r.error_kind, r.agent_run.exit_reason) == ("error", "agent", "error"), r.reason
    assert "HTTP 503" in r.reason and len(redo) == 1


def test_a_refused_first_request_is_the_machinerys_error_and_is_redone(demo, tmp_path):
    r, redo = _run(demo, tmp_path, [("status", 401)])
    assert (r.status, r.error_kind, r.agent_run.exit_reason) == ("error", "agent", "error")
    assert "HTTP 401" in r.reason and len(redo) == 1


# truncates and rewrites a file, in a folder the copy leaves out, until the sandbox is gone: the daemon's archive
# of /testbed is cut short whenever its header and the file's data disagree
SCRAMBLER = ('mkdir -p __pycache__ && for k in 1 2 3 4 5 6 7 8; do setsid sh -c "while :; do : > __pycache__/x$k; '
             'head -c 20000000 /dev/zero > __pycache__/x$k; done" >/dev/null 2>&1 < /dev/null & done; sleep 2')


@pytest.mark.slow
@pytest.mark.parametrize("fix, attempts, status", [(False, 5, "failed"), (True, 1, "resolved")], ids=["no-fix", "fix"])
def test_a_process_left_rewriting_files_does_not_make_the_attempt_an_error(demo, tmp_path, fix, attempts, status):
    """Without the defence each copy broke off about two times in five on this 2-core machine (8 processes at
    20 MB: 5 of 10 copies of a tree broke off while they ran, one at 50 MB 4 of 10): five attempts all
    go through about one time in twelve."""
    command = SCRAMBLER
    if fix:
        command = f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF\n{SCRAMBLER}"
    cfg = CommandAgentConfig(kind="command", name="scrambler", command=command)
    agent = CommandAgent(cfg.command, cfg=cfg)
    bundle = demo.bundle(DIST)
    out = tmp_path / "scrambler.jsonl"
    run_evaluation(demo.ctx, [bundle], agent, out, attempts=attempts)
    results = read_results(out)
    assert [r.status for r in results] == [status] * attempts, [r.reason for r in results]
    assert pending([bundle], agent, attempts, out, retry_errors=True) == []
