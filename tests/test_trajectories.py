"""Command agents' own records: mini-swe-agent's trajectory, Claude Code's stream-json, Codex's --json events.

Fixtures are written here in the frameworks' shapes (mini-swe-agent's read from its installed source and from
a run of the real `mini` against the scripted model, which the last test repeats when it is installed).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_model import FakeModel, tool_call

from sweserve.agents.command import TRAJECTORY_PATH, CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.agents.trajectory import parse_trajectory
from sweserve.environment.sandbox import ExecResult
from sweserve.models import AgentRun, Resources, Task, TaskBundle, TestSpec

ROOT = Path(__file__).resolve().parent.parent


def _assistant(text, command, call_id, prompt, completion, cost):
    return {"content": text, "role": "assistant", "function_call": None, "provider_specific_fields": None,
            "tool_calls": [{"function": {"arguments": json.dumps({"command": command}), "name": "bash"},
                            "id": call_id, "type": "function"}],
            "extra": {"actions": [{"command": command, "tool_call_id": call_id}],
                      "response": {"id": "r", "model": "m", "usage": {"completion_tokens": completion,
                                                                      "prompt_tokens": prompt,
                                                                      "total_tokens": prompt + completion}},
                      "cost": cost, "timestamp": 1.0}}


def _observation(call_id, output, code):
    return {"content": json.dumps({"returncode": code, "output": output}), "role": "tool", "tool_call_id": call_id,
            "extra": {"raw_output": output, "returncode": code, "timestamp": 2.0, "exception_info": ""}}


MINI = {
    "info": {"model_stats": {"instance_cost": 0.0133, "api_calls": 4}, "mini_version": "2.4.6",
             "exit_status": "Submitted", "submission": "", "config": {"agent": {}, "model": {}}},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve this issue: shard ranges"},
        _assistant("Let me read the file.", "cat parallel_state.py", "c1", 1000, 50, 0.004),
        _observation("c1", "def shard_range(n, world, rank):\n    ...\n", 0),
        {"role": "user", "content": "No tool calls found in the response. Every response MUST include at least one "
                                    "tool call.",  # a billed call mini-swe-agent could not parse
         "extra": {"interrupt_type": "FormatError", "cost": 0.001,
                   "response": {"id": "r", "usage": {"prompt_tokens": 1200, "completion_tokens": 5}}}},
        _assistant("Now fix it.", "sed -i 's/a/b/' parallel_state.py", "c2", 1500, 80, 0.005),
        _observation("c2", "", 0),
        _assistant("Done.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "c3", 1800, 10, 0.0033),
        {"role": "tool", "tool_call_id": "c3", "content": "",
         "extra": {"raw_output": "", "returncode": -1, "exception_info": "action was not executed"}},
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}},
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}

CLAUDE = [
    {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-4-5", "tools": ["Bash", "Edit"],
     "cwd": "/testbed"},
    {"type": "assistant", "session_id": "s1", "parent_tool_use_id": None,
     "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                 "content": [{"type": "text", "text": "I'll look at the sharding code."}],
                 "usage": {"input_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0,
                           "output_tokens": 30}}},
    {"type": "assistant", "session_id": "s1", "parent_tool_use_id": None,
     "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                 "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                              "input": {"command": "grep -n shard_range -r python", "description": "find it"}}],
                 "usage": {"input_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0,
                           "output_tokens": 30}}},
    {"type": "user", "session_id": "s1", "parent_tool_use_id": None,
     "message": {"role": "user", "content": [{"tool_use_id": "toolu_1", "type": "tool_result",
                                              "content": "python/x.py:3:def shard_range", "is_error": False}]}},
    {"type": "assistant", "session_id": "s1", "parent_tool_use_id": None,
     "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                 "content": [{"type": "tool_use", "id": "toolu_2", "name": "Edit",
                              "input": {"file_path": "/testbed/python/x.py", "old_string": "a", "new_string": "b"}}],
                 "usage": {"input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000,
                           "output_tokens": 40}}},
    {"type": "user", "session_id": "s1", "parent_tool_use_id": None,
     "message": {"role": "user", "content": [{"tool_use_id": "toolu_2", "type": "tool_result",
                                              "content": [{"type": "text", "text": "The file was updated."}]}]}},
    {"type": "assistant", "session_id": "s1", "parent_tool_use_id": None,
     "message": {"id": "msg_3", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                 "content": [{"type": "text", "text": "Fixed the uneven shards."}],
                 "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2100,
                           "output_tokens": 12}}},
    {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 20100, "duration_api_ms": 15000,
     "num_turns": 3, "result": "Fixed the uneven shards.", "session_id": "s1", "total_cost_usd": 0.0421,
     "usage": {"input_tokens": 18, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 4100,
               "output_tokens": 82}},
]

CODEX = [
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Looking for shard_range**"}},
    {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc 'rg shard'",
                                      "aggregated_output": "", "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc 'rg shard'",
                                        "aggregated_output": "python/x.py:3:def shard_range\n", "exit_code": 0,
                                        "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "file_change", "status": "completed",
                                        "changes": [{"path": "/testbed/python/x.py", "kind": "update"}]}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "Shards are even now."}},
    {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}},
]


def jsonl(events):
    return "".join(json.dumps(e) + "\n" for e in events)


def test_mini_swe_agent_trajectory():
    traj = parse_trajectory("mini-swe-agent", json.dumps(MINI))
    assert (traj.calls, traj.prompt_tokens, traj.completion_tokens) == (4, 5500, 145)
    assert traj.cost_usd == pytest.approx(0.0133)
    first = traj.steps[0]
    assert first.thought == "Let me read the file." and first.command == "cat parallel_state.py"
    assert first.output == "[exit code: 0]\ndef shard_range(n, world, rank):\n    ...\n"
    assert [s.command for s in traj.steps][1:] == ["sed -i 's/a/b/' parallel_state.py",
                                                   "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]


def test_claude_code_stream_json():
    traj = parse_trajectory("claude-code", "some banner line\n" + jsonl(CLAUDE))
    assert (traj.calls, traj.prompt_tokens, traj.completion_tokens) == (3, 6118, 82)
    assert traj.cost_usd == pytest.approx(0.0421)
    assert [(s.thought, s.command, s.output) for s in traj.steps] == [
        ("I'll look at the sharding code.", "grep -n shard_range -r python", "python/x.py:3:def shard_range"),
        ("", 'Edit {"file_path": "/testbed/python/x.py", "old_string": "a", "new_string": "b"}',
         "The file was updated."),
        ("Fixed the uneven shards.", "", ""),
    ]


def test_claude_code_without_its_result_event_sums_each_message_once():
    traj = parse_trajectory("claude-code", jsonl(CLAUDE[:-1]))  # killed before the end: no result event
    assert (traj.calls, traj.prompt_tokens, traj.completion_tokens, traj.cost_usd) == (3, 6118, 82, None)


def test_codex_json_events():
    traj = parse_trajectory("codex", jsonl(CODEX))
    assert (traj.calls, traj.prompt_tokens, traj.completion_tokens, traj.cost_usd) == (2, 24763, 122, None)
    assert traj.steps[0].thought == "**Looking for shard_range**"
    assert traj.steps[0].command == "bash -lc 'rg shard'"
    assert traj.steps[0].output == "[exit code: 0]\npython/x.py:3:def shard_range\n"
    assert traj.steps[1].output == "update /testbed/python/x.py"
    assert traj.steps[2].thought == "Shards are even now."


@pytest.mark.parametrize("fmt", ["mini-swe-agent", "claude-code", "codex"])
@pytest.mark.parametrize("junk", ["", "not json", "[1, 2]", '{"messages": 5, "info": []}', "\x00" * 10,
                                  jsonl([{"type": "assistant", "message": []}, {"type": "result", "usage": "x",
                                                                                "num_turns": -3}]),
                                  json.dumps({"messages": [{"role": "assistant", "extra": {"actions": [7],
                                                                                           "cost": "free"}}]})])
def test_a_record_that_is_not_its_format_never_raises(fmt, junk):
    traj = parse_trajectory(fmt, junk)
    assert traj.calls >= 0 and traj.prompt_tokens >= 0 and traj.cost_usd in (None, 0) or traj.cost_usd > 0


class ScriptedBox:
    """The Sandbox calls a command agent makes, scripted: its output and the files it left."""

    def __init__(self, output: str, files: dict[str, bytes] | None = None, truncated_bytes: int = 0):
        self.output, self.files, self.truncated_bytes, self.env = output, files or {}, truncated_bytes, None

    def put_file(self, path, data, mode=0o644):
        self.files[path] = data

    def exec(self, command, timeout, workdir="/testbed", env=None, user=None):
        self.env = env
        return ExecResult(0, self.output, truncated=bool(self.truncated_bytes),
                          output_bytes=len(self.output.encode()) + self.truncated_bytes)

    def read_file(self, path, max_bytes=0):
        return self.files.get(path)


def bundle():
    from datetime import datetime, timezone

    task = Task(task_id="o__r-1", repo="o/r", profile="sglang", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                resources=Resources(), test=TestSpec(files=["t.py"]))
    return TaskBundle(task=task, instruction="fix it", oracle_patch="", tests_patch="")


def agent(trajectory, command="run-agent"):
    cfg = CommandAgentConfig(kind="command", name="x", command=command, trajectory=trajectory, env=["KEY"])
    return CommandAgent(cfg.command, cfg=cfg, env={"KEY": "sk-secret-value"})


def test_command_agent_keeps_the_whole_log_and_its_trajectory_out_of_the_index():
    noise = "".join(f"line {i} of a long agent log\n" for i in range(2000)) + "key sk-secret-value\n"
    box = ScriptedBox(noise, {TRAJECTORY_PATH: json.dumps(MINI).encode()})
    run = agent("mini-swe-agent").solve(box, bundle())
    assert box.env["SWESERVE_TRAJECTORY"] == TRAJECTORY_PATH
    assert (run.steps, run.prompt_tokens, run.completion_tokens, run.cost_usd) == (4, 5500, 145, 0.0133)
    assert set(run.records) == {"agent.log", "trajectory.json", "steps.json"}
    assert run.records["agent.log"].startswith("line 0 of") and len(run.records["agent.log"]) > 50_000
    assert "sk-secret-value" not in run.records["agent.log"] and "key ***" in run.records["agent.log"]
    assert 3900 < len(run.log_tail) <= 4000 and run.log_tail.endswith("key ***\n")
    assert json.loads(run.records["steps.json"])[0]["command"] == "cat parallel_state.py"
    index_line = json.loads(run.model_dump_json())
    assert "records" not in index_line and AgentRun.model_validate(index_line).steps == 4


def test_stream_formats_are_the_agents_stdout_and_a_cut_log_says_so():
    run = agent("claude-code").solve(ScriptedBox(jsonl(CLAUDE), truncated_bytes=123), bundle())
    assert (run.steps, run.cost_usd) == (3, 0.0421) and "trajectory.jsonl" in run.records
    assert run.records["agent.log"].startswith("[sweserve: the first 123 bytes of this log were cut]")
    run = agent("codex").solve(ScriptedBox(jsonl(CODEX)), bundle())
    assert (run.steps, run.prompt_tokens, run.cost_usd) == (2, 24763, None)
    run = agent(None).solve(ScriptedBox("plain\n"), bundle())  # no trajectory configured: the log only
    assert set(run.records) == {"agent.log"} and run.steps == 0


def test_shipped_configs_name_their_trajectory_format():
    from importlib import resources

    from sweserve.agents.config import load_agent_config

    folder = resources.files("sweserve.harness").joinpath("agents")
    want = {"mini-swe-agent": ("mini-swe-agent", '-o "$SWESERVE_TRAJECTORY"'),
            "claude-code": ("claude-code", "--output-format stream-json --verbose"), "codex": ("codex", "--json")}
    for name, (fmt, flag) in want.items():
        cfg = load_agent_config(folder.joinpath(f"{name}.yaml"))
        assert cfg.trajectory == fmt and flag in cfg.command


def _mini() -> str | None:
    for cand in (os.environ.get("SWESERVE_MINI"), str(ROOT / ".sweserve" / "mini" / "bin" / "mini"),
                 shutil.which("mini")):
        if cand and Path(cand).is_file():
            return cand
    return None


@pytest.mark.slow
def test_real_mini_swe_agent_against_the_scripted_model(tmp_path):
    """The real `mini` CLI (scripts/setup.sh installs it in .sweserve/mini) run as the shipped config runs it,
    against tests/fake_model.py: its trajectory file is what parse_trajectory reads."""
    mini = _mini()
    if mini is None:
        if os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1":
            pytest.fail("mini-swe-agent is not installed (scripts/setup.sh installs it in .sweserve/mini)")
        pytest.skip("mini-swe-agent is not installed (scripts/setup.sh installs it in .sweserve/mini)")
    script = [tool_call("bash", {"command": "ls"}, "c1"),
              tool_call("bash", {"command": "echo fixed > fix.txt && cat fix.txt"}, "c2"),
              tool_call("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}, "c3")]
    script[0]["content"] = "Let me look around."
    work = tmp_path / "testbed"
    work.mkdir()
    env = {**os.environ, "MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(tmp_path)}
    with FakeModel(script) as fake:
        proc = subprocess.run([mini, "-m", "openai/default", "-t", "write fix.txt", "--yolo", "--exit-immediately",
                               "-o", str(tmp_path / "trajectory.json"), "-c", "mini.yaml",
                               "-c", f"model.model_kwargs.api_base={fake.base_url}",
                               "-c", "model.model_kwargs.api_key=none"],
                              cwd=work, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (work / "fix.txt").read_text() == "fixed\n"
    traj = parse_trajectory("mini-swe-agent", (tmp_path / "trajectory.json").read_text())
    assert (traj.calls, traj.prompt_tokens, traj.completion_tokens) == (3, 300, 60)  # fake_model's usage, 3 calls
    assert [s.command for s in traj.steps] == ["ls", "echo fixed > fix.txt && cat fix.txt",
                                               "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert traj.steps[0].thought == "Let me look around."
    assert traj.steps[1].output == "[exit code: 0]\nfixed\n"
    assert sys.executable  # the harness's interpreter is not the agent's: mini runs from its own venv
