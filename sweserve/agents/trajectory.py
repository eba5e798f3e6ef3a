"""Command agents' own records, read in their frameworks' formats: steps, tokens, cost and each step's text.

- `mini-swe-agent`: the trajectory JSON it saves with `-o FILE` (`trajectory_format` "mini-swe-agent-1.1"):
  `info.model_stats` {instance_cost, api_calls}; `messages`, where each assistant message carries
  `extra.actions` [{command, tool_call_id}], `extra.response.usage` and `extra.cost`, and each observation
  (role `tool`, or `user` for text-based actions) carries `extra.raw_output` and `extra.returncode`.
- `claude-code`: `claude -p --output-format stream-json --verbose` on stdout, one JSON event a line:
  `assistant` events (message.content blocks `text`, `thinking`, `tool_use` {id, name, input}; message.usage),
  `user` events with `tool_result` blocks {tool_use_id, content}, and a final `result` event
  {num_turns, total_cost_usd, usage}.
- `codex`: `codex exec --json` on stdout, one JSON event a line: `item.completed` with items of type
  `reasoning`/`agent_message` {text}, `command_execution` {command, aggregated_output, exit_code},
  `file_change` {changes [{path, kind}]}, `mcp_tool_call`, `web_search`; `turn.completed` {usage
  {input_tokens, cached_input_tokens, output_tokens}}. Codex reports no cost.

A record that is not what its format says (the agent's own output, which the candidate controls) gives
what could be read and never raises: it is a reviewer's aid and a meter, never a grade.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from sweserve.models import TrajectoryStep

TrajectoryFormat = Literal["mini-swe-agent", "claude-code", "codex"]
STEP_TEXT_CHARS = 20_000  # of each step's thought, command and output kept in steps.json


@dataclass
class Trajectory:
    steps: list[TrajectoryStep] = field(default_factory=list)
    calls: int = 0  # model calls (turns), what AgentRun.steps counts
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


def _cap(text: Any) -> str:
    if not isinstance(text, str):
        text = "" if text is None else json.dumps(text) if not isinstance(text, (int, float)) else str(text)
    return text if len(text) <= STEP_TEXT_CHARS else text[:STEP_TEXT_CHARS] + f"\n… ({len(text)} characters)"


MAX_COUNT = 2**53  # a token or call count past this is no count (sums of 4,300-digit ones outgrew what a results
# reader takes back: red team 15d, R15d-1)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else 0


def _num(value: Any) -> float | None:
    """A non-negative finite number as the agent's record gave it (an int too large for a float is none)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        return None
    try:
        number = float(value)
    except OverflowError:  # a cost of 401 digits (red team 14a, R14a-6)
        return None
    return number if math.isfinite(number) else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _events(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def _text_of(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of blocks."""
    if isinstance(content, str):
        return content
    parts = []
    for block in _list(content):
        block = _dict(block)
        text = block.get("text") if isinstance(block.get("text"), str) else block.get("thinking")
        if isinstance(text, str):
            parts.append(text)
        elif isinstance(block.get("content"), (str, list)):
            parts.append(_text_of(block["content"]))
    return "\n".join(parts)


def parse_mini_swe_agent(text: str) -> Trajectory:
    try:
        data = _dict(json.loads(text))
    except ValueError:
        return Trajectory()
    messages = [_dict(m) for m in _list(data.get("messages"))]
    traj = Trajectory()
    cost = 0.0
    priced = False
    for i, msg in enumerate(messages):
        extra = _dict(msg.get("extra"))
        # every billed call left its response: an assistant message, or the format-error message that
        # replaced one (mini-swe-agent keeps the response and cost of a call it could not parse)
        usage = _dict(_dict(extra.get("response")).get("usage"))
        traj.prompt_tokens += _int(usage.get("prompt_tokens"))
        traj.completion_tokens += _int(usage.get("completion_tokens"))
        if (c := _num(extra.get("cost"))) is not None:
            cost, priced = cost + c, True
        if msg.get("role") != "assistant":
            continue
        actions = [_dict(a) for a in _list(extra.get("actions"))]
        ids = {a.get("tool_call_id") for a in actions if a.get("tool_call_id")}
        outputs = []
        for later in messages[i + 1:]:
            if later.get("role") not in ("tool", "user") or later.get("role") == "user" and ids:
                break
            if later.get("role") == "tool" and later.get("tool_call_id") not in ids:
                break
            obs = _dict(later.get("extra"))
            raw = obs.get("raw_output") if "raw_output" in obs else _text_of(later.get("content"))
            code = obs.get("returncode")
            outputs.append((f"[exit code: {code}]\n" if code is not None else "") + _cap(raw))
        traj.steps.append(TrajectoryStep(thought=_cap(_text_of(msg.get("content"))),
                                         command=_cap("\n".join(str(a.get("command", "")) for a in actions)),
                                         output=_cap("\n".join(outputs))))
    stats = _dict(_dict(data.get("info")).get("model_stats"))
    traj.calls = _int(stats.get("api_calls")) or len(traj.steps)
    instance_cost = _num(stats.get("instance_cost"))
    traj.cost_usd = instance_cost if instance_cost else (cost if priced and cost else None)
    return traj


def _tool_command(name: str, args: dict) -> str:
    if isinstance(args.get("command"), str):
        return args["command"] if name in ("Bash", "bash", "") else f"{name}: {args['command']}"
    return f"{name} {json.dumps(args, ensure_ascii=False)}"


def parse_claude_code(text: str) -> Trajectory:
    traj = Trajectory()
    by_tool: dict[str, TrajectoryStep] = {}
    usage_by_message: dict[str, dict] = {}
    thought: list[str] = []
    result: dict | None = None
    for event in _events(text):
        kind = event.get("type")
        message = _dict(event.get("message"))
        if kind == "assistant":
            mid = str(message.get("id") or len(usage_by_message))
            usage_by_message[mid] = _dict(message.get("usage"))  # one message may span several events
            for block in [_dict(b) for b in _list(message.get("content"))]:
                if block.get("type") in ("text", "thinking"):
                    thought.append(_text_of([block]))
                elif block.get("type") == "tool_use":
                    step = TrajectoryStep(thought=_cap("\n".join(t for t in thought if t)),
                                          command=_cap(_tool_command(str(block.get("name", "")),
                                                                     _dict(block.get("input")))))
                    thought = []
                    traj.steps.append(step)
                    by_tool[str(block.get("id"))] = step
        elif kind == "user":
            for block in [_dict(b) for b in _list(message.get("content"))]:
                called = by_tool.get(str(block.get("tool_use_id")))
                if block.get("type") == "tool_result" and called is not None:
                    called.output = _cap(_text_of(block.get("content")))
        elif kind == "result":
            result = event
    if thought:  # the closing words after the last tool call
        traj.steps.append(TrajectoryStep(thought=_cap("\n".join(t for t in thought if t))))
    usage = _dict(result.get("usage")) if result else {}
    if not usage:
        usage = {k: sum(_int(u.get(k)) for u in usage_by_message.values())
                 for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")}
    traj.prompt_tokens = sum(_int(usage.get(k)) for k in
                             ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    traj.completion_tokens = _int(usage.get("output_tokens"))
    traj.calls = (_int(result.get("num_turns")) if result else 0) or len(usage_by_message)
    traj.cost_usd = _num(result.get("total_cost_usd")) if result else None
    return traj


def parse_codex(text: str) -> Trajectory:
    traj = Trajectory()
    thought: list[str] = []
    for event in _events(text):
        kind = event.get("type")
        if kind == "turn.completed":
            usage = _dict(event.get("usage"))
            traj.prompt_tokens += _int(usage.get("input_tokens"))  # cached input is part of input_tokens
            traj.completion_tokens += _int(usage.get("output_tokens"))
            continue
        if kind != "item.completed":
            continue
        item = _dict(event.get("item"))
        itype = item.get("type") or item.get("item_type")
        if itype in ("reasoning", "agent_message"):
            thought.append(_text_of(item.get("text")))
            continue
        if itype == "command_execution":
            code = item.get("exit_code")
            step = TrajectoryStep(command=_cap(item.get("command")),
                                  output=(f"[exit code: {code}]\n" if code is not None else "")
                                  + _cap(item.get("aggregated_output")))
        elif itype == "file_change":
            changes = [_dict(c) for c in _list(item.get("changes"))]
            step = TrajectoryStep(command="apply_patch", output=_cap(
                "\n".join(f"{c.get('kind', 'update')} {c.get('path', '')}" for c in changes)))
        elif itype in ("mcp_tool_call", "web_search", "todo_list"):
            step = TrajectoryStep(command=_cap(f"{itype} {json.dumps(item, ensure_ascii=False)}"))
        else:
            continue
        step.thought = _cap("\n".join(t for t in thought if t))
        thought = []
        traj.steps.append(step)
    if thought:
        traj.steps.append(TrajectoryStep(thought=_cap("\n".join(t for t in thought if t))))
    traj.calls = sum(1 for s in traj.steps if s.command)
    return traj


PARSERS = {"mini-swe-agent": parse_mini_swe_agent, "claude-code": parse_claude_code, "codex": parse_codex}


def parse_trajectory(fmt: str, text: str) -> Trajectory:
    """The trajectory `text` in format `fmt`; an empty Trajectory when it cannot be read."""
    try:
        return PARSERS[fmt](text)
    except Exception:  # noqa: BLE001 - the agent wrote it: whatever it holds, the attempt is graded (R14a-6)
        return Trajectory()


def steps_json(traj: Trajectory) -> str:
    return json.dumps([s.model_dump() for s in traj.steps], indent=1, ensure_ascii=False) + "\n"
