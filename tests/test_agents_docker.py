"""Agents in real sandboxes: the API agent over swe-rex against a scripted model, command agent configs."""

import json
from pathlib import Path

import pytest
from fake_model import FakeModel, tool_call

from sweserve.agents.api import ApiAgent
from sweserve.agents.command import CommandAgent
from sweserve.agents.config import ApiAgentConfig, CommandAgentConfig, Price
from sweserve.demo import files
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.results import read_results
from sweserve.evaluation.trial import evaluate_task

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"

SOLVE = [
    tool_call("bash", {"command": f"cat {PATH}"}),
    tool_call("bash", {"command": f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF"}),
    tool_call("bash", "not json at all", call_id="c2"),
    tool_call("bash", {"command": "PYTHONPATH=python python -c 'from sglang.srt.distributed.parallel_state import "
                                  "shard_range as s; print([s(10, 4, r) for r in range(4)])'"}),
    tool_call("submit", {}),
]


def api_cfg(fake, **kw):
    return ApiAgentConfig(kind="api", name="scripted", model="fake-1", base_url=fake.base_url, api_key_env="FAKE_KEY",
                          request_timeout_s=2, request_retries=1, **kw)


def test_api_agent_solves_a_task_through_swerex(demo, tmp_path):
    with FakeModel(SOLVE) as fake:
        agent = ApiAgent(api_cfg(fake, price=Price(prompt_per_mtok=3, completion_per_mtok=15)),
                         env={"FAKE_KEY": "sk-live-123"})
        out = tmp_path / "api.jsonl"
        run_evaluation(demo.ctx, [demo.bundle(DIST)], agent, out)
    (r,) = read_results(out)
    assert r.status == "resolved", r.reason
    run = r.agent_run
    assert (run.exit_reason, run.steps, run.prompt_tokens, run.completion_tokens) == ("submitted", 5, 500, 100)
    assert run.cost_usd == pytest.approx((500 * 3 + 100 * 15) / 1e6) and run.model == "fake-1"
    tool_msgs = [m for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert "def shard_range" in tool_msgs[0]["content"] and "[exit code: 0]" in tool_msgs[0]["content"]
    assert "arguments must be JSON" in tool_msgs[2]["content"]
    assert "(0, 3), (3, 6), (6, 8), (8, 10)" in tool_msgs[3]["content"]
    assert fake.requests[0]["messages"][1]["content"].startswith("# Fix uneven tensor-parallel shard ranges")
    assert "sk-live-123" not in out.read_text()


@pytest.mark.parametrize("script, cause", [
    ([("status", 500)], "HTTP 500"),
    ([("raw", b"<html>")], "invalid JSON"),
    ([("sleep", 5)], "timed out"),
])
def test_misbehaving_model_is_an_error_not_a_crash(demo, tmp_path, script, cause):
    bundles = [demo.bundle(DIST), demo.bundle("sweserve-demo__sglang-mini-105")]
    with FakeModel(script) as fake:
        out = tmp_path / "bad.jsonl"
        run_evaluation(demo.ctx, bundles, ApiAgent(api_cfg(fake), env={}), out)
    results = read_results(out)
    assert [r.status for r in results] == ["error", "error"]
    assert all(cause in r.reason and r.agent_run.exit_reason == "error" for r in results)


def test_step_limit_is_recorded(demo):
    with FakeModel([tool_call("bash", {"command": "true"})]) as fake:
        r = evaluate_task(demo.ctx, demo.bundle(DIST), ApiAgent(api_cfg(fake, max_steps=2), env={}))
    assert r.status == "failed" and r.agent_run.exit_reason == "step_limit" and r.agent_run.steps == 2


def test_command_agent_config_installs_and_hides_secrets(demo, tmp_path):
    cfg = CommandAgentConfig(kind="command", name="installed", version="9",
                             install=["echo ready > /opt/agent-marker"],
                             command='cat /opt/agent-marker; echo "key=$SECRET_KEY"; echo "other=${OTHER:-unset}"',
                             env=["SECRET_KEY"])
    agent = CommandAgent(cfg.command, cfg=cfg, env={"SECRET_KEY": "hunter2", "OTHER": "leak"})
    out = tmp_path / "cmd.jsonl"
    run_evaluation(demo.ctx, [demo.bundle(DIST)], agent, out)
    (r,) = read_results(out)
    assert r.status == "failed" and r.agent_run.version == "9"
    assert "ready" in r.agent_run.log_tail and "key=***" in r.agent_run.log_tail
    assert "other=unset" in r.agent_run.log_tail
    assert "hunter2" not in out.read_text()
    assert json.loads(out.read_text())["agent"] == "installed"


def test_command_agent_trajectory_and_whole_log_land_in_the_trial_folder(demo, tmp_path):
    """A Claude Code-shaped agent (stream-json on stdout): its record in the trial folder, steps/tokens/cost in
    the result, its whole log kept; the reviewer page shows its steps."""
    from test_trajectories import CLAUDE, jsonl

    from sweserve.reporting.review import review_html

    events = tmp_path / "events.jsonl"
    events.write_text(jsonl(CLAUDE))
    noise = "seq 1 3000 | sed 's/^/agent progress line /'"
    cfg = CommandAgentConfig(kind="command", name="claude-shaped", trajectory="claude-code",
                             command=f"{noise}; cat <<'SWESERVE_EOF'\n{events.read_text()}SWESERVE_EOF")
    out = tmp_path / "cc.jsonl"
    run_evaluation(demo.ctx, [demo.bundle(DIST)], CommandAgent(cfg.command, cfg=cfg), out)
    (r,) = read_results(out)
    run = r.agent_run
    assert (run.steps, run.prompt_tokens, run.completion_tokens, run.cost_usd) == (3, 6118, 82, 0.0421), r.reason
    folder = Path(r.trial_dir)
    log = (folder / "agent.log").read_text()
    assert log.startswith("agent progress line 1\n") and "agent progress line 3000" in log  # not a 4,000-char tail
    assert (folder / "trajectory.jsonl").read_text().count('"type": "assistant"') == 4
    steps = json.loads((folder / "steps.json").read_text())
    assert steps[0]["command"] == "grep -n shard_range -r python"
    page = review_html(demo.bundle(DIST), r)
    assert "step 1: grep -n shard_range -r python" in page and "python/x.py:3:def shard_range" in page
