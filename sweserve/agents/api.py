"""The built-in API agent: a tool-using loop against an OpenAI-compatible chat endpoint.

The loop runs on the host; its bash tool runs in the sandbox through a swe-rex session (the server is
baked into every env image and listens on the sandbox's loopback; the harness reaches it through
`Sandbox.forward`, a `docker exec` relay, because a sandbox's network has no route to or from the host). Every
model failure (bad JSON, time-outs, 5xx) ends the run, never with an exception: as exit_reason "error" with the
cause in `error`, or as `model_refused` where the attempt brought it on itself (below).

An error is the machinery's, and `run --retry-errors` redoes it; what the attempt brought on itself is not an
error but how its run ended, and its tree is graded as it stands, as at a step limit. Otherwise an agent that
doubts its fix would end its attempt on purpose and be scored only on the attempts it trusts:
- `model_refused`: the endpoint refused, as malformed or too large (`CONVERSATION_REFUSALS`), a conversation it
  had answered before (a context window overrun: the observations the sandbox returned made it so), or failed
  it (a time-out, a 5xx, a 429) while it still answers the run's first request (`_endpoint_answers`);
- `tool_server_lost`: the tool server stopped answering while the host still reaches the sandbox (what ran in
  the sandbox, as root, stopped it);
- a malformed tool call is answered with an error message, as a bad JSON argument is.
A refusal of the first request (a bad key, model or parameter), an endpoint that is down (it fails the first
request too) and a sandbox that is gone stay errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
import uuid
from typing import Any

import aiohttp
from swerex.exceptions import SwerexException

from sweserve.agents.base import TaskImageAgent
from sweserve.agents.chat_client import RATE_WINDOW_S, ModelError, lists_models
from sweserve.agents.chat_client import chat as _chat
from sweserve.agents.config import ApiAgentConfig
from sweserve.agents.trajectory import MAX_COUNT
from sweserve.environment.sandbox import WORKDIR, Sandbox
from sweserve.errors import LimitExceeded
from sweserve.models import AgentRun, TaskBundle

SYSTEM_PROMPT = (
    "You are a software engineer working in the git repository at /testbed. Solve the task you are given "
    "by editing the repository's source code. Use the bash tool to inspect files, run commands and edit "
    "code. Hidden tests will grade your change, so do not edit tests to make them pass. When you are done, "
    "call the submit tool."
)
# HTTP statuses by which an endpoint refuses a request for its content (400 with context_length_exceeded, 413,
# 422): after a first answer, the conversation's own doing
CONVERSATION_REFUSALS = frozenset({400, 413, 422})
TOOLS = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a bash command in /testbed; state (cwd, env) persists between calls.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Finish: the current state of /testbed is your answer.",
        "parameters": {"type": "object", "properties": {}}}},
]


class ToolServerError(Exception):
    """The tool server in the sandbox (swe-rex) could not be reached."""


def chat(cfg: ApiAgentConfig, api_key: str | None, messages: list[dict]) -> dict:
    """One step of the tool loop: a chat completion offering the bash and submit tools."""
    return _chat(cfg, api_key, messages, tools=TOOLS)


class ToolServerBroke(Exception):
    """The tool server answered something that is not an answer (a reply of the wrong shape, an exception of its
    own, a session that ended): what runs in the sandbox, as root, can make it so."""


TRANSFER_MESSAGE_MAX = 2000  # characters of an exception's message the tool server sends back, kept
REPLY_MAX_BYTES = 32 * 2**20  # a tool server's reply read at most (a command's output, JSON-escaped)


def _safe_runtime(host: str, port: int, token: str) -> Any:
    """swe-rex's `RemoteRuntime`, with the one thing it must not do on the host undone: its answer to an error
    (HTTP 511) names a Python class by its path and a message, and swe-rex imports the module and calls the
    name with the message, here, in sweserve's process. The server is in the candidate's sandbox, where the agent
    is root and can serve port 8000 itself: `builtins.exec` and a message ran any code on the host, with its
    Docker socket (red team 14a, R14a-2); `builtins.KeyboardInterrupt` ended `sweserve run`. Only the two
    exceptions the shell handles are raised as themselves; any other name is a `ToolServerBroke`."""
    from pydantic import BaseModel
    from swerex.exceptions import BashIncorrectSyntaxError, CommandTimeoutError
    from swerex.runtime.abstract import _ExceptionTransfer
    from swerex.runtime.remote import RemoteRuntime

    known = {f"swerex.exceptions.{cls.__name__}": cls for cls in (CommandTimeoutError, BashIncorrectSyntaxError)}

    class _Transfer(BaseModel):
        swerexception: _ExceptionTransfer

    class SafeRuntime(RemoteRuntime):
        async def _request(self, endpoint: str, payload: Any, output_class: Any, num_retries: int = 0) -> Any:
            # swe-rex reads a reply whole (`resp.json()`): a server that streams without end would fill the host's
            # memory (red team 14a's lead); a reply past REPLY_MAX_BYTES is the server's breakage
            # a redirect is never followed: the host would make requests the sandbox's network cannot (red team
            # 14d, R14d-1: a 307 to any address the host reaches, the answer read as the command's output)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
                async with session.post(f"{self._api_url}/{endpoint}", headers=self._headers, allow_redirects=False,
                                        json=payload.model_dump() if payload else None) as resp:
                    if resp.status != 511 and not 200 <= resp.status < 300:
                        raise ToolServerBroke(f"HTTP {resp.status} from the tool server")
                    body = bytearray()  # read to its end (one read returns what is buffered: R14d-2)
                    async for chunk in resp.content.iter_chunked(1 << 16):
                        body += chunk
                        if len(body) > REPLY_MAX_BYTES:
                            raise ToolServerBroke(f"a reply over {REPLY_MAX_BYTES // 2**20} MB")
                    if not bytes(body[:64]).lstrip().startswith(b"{"):
                        raise ToolServerBroke("a reply that is not a JSON object")
                    try:  # parsed by the model's own schema: no Python object for what it ignores (R14d-4)
                        if resp.status != 511:
                            return output_class.model_validate_json(bytes(body))
                        transfer = _Transfer.model_validate_json(bytes(body)).swerexception
                    except ValueError as exc:  # not what swe-rex sends
                        raise ToolServerBroke(f"a reply of the wrong shape: {str(exc)[:200]}") from None
                    self._handle_transfer_exception(transfer)

        def _handle_transfer_exception(self, exc_transfer: Any) -> None:
            message = str(exc_transfer.message)[:TRANSFER_MESSAGE_MAX]
            cls = known.get(exc_transfer.class_path)
            if cls is not None:
                raise cls(message) from None
            raise ToolServerBroke(f"{str(exc_transfer.class_path)[:200]}: {message}") from None

    return SafeRuntime(host=host, port=port, auth_token=token, timeout=30)


class SwerexShell:
    """A persistent bash session in the sandbox, through swe-rex's server."""

    def __init__(self, box: Sandbox, startup_timeout: float = 60):
        from swerex.runtime.abstract import BashAction, CreateBashSessionRequest

        logging.getLogger("rex-runtime").setLevel(logging.CRITICAL + 1)
        token = uuid.uuid4().hex
        box.start_background(["swerex-remote", "--auth-token", token, "--host", "127.0.0.1", "--port", "8000"])
        host, port = box.forward(8000).rsplit(":", 1)
        self._runtime = _safe_runtime(f"http://{host}", int(port), token)
        self._BashAction = BashAction
        deadline = time.monotonic() + startup_timeout
        while not asyncio.run(self._runtime.is_alive(timeout=1.0)).is_alive:
            if time.monotonic() > deadline:
                raise ToolServerError(f"swe-rex server in the sandbox did not answer within {startup_timeout:g}s")
            time.sleep(0.25)
        asyncio.run(self._runtime.create_session(CreateBashSessionRequest(startup_timeout=10)))
        self.run(f"cd {WORKDIR}", 30)

    def run(self, command: str, timeout: float) -> tuple[str, int | None]:
        from swerex.exceptions import BashIncorrectSyntaxError, CommandTimeoutError
        from swerex.runtime.abstract import BashInterruptAction

        try:
            obs = asyncio.run(self._runtime.run_in_session(
                self._BashAction(command=command, timeout=timeout, check="silent")))
            return obs.output, obs.exit_code
        except CommandTimeoutError:
            try:
                asyncio.run(self._runtime.run_in_session(BashInterruptAction()))
            except Exception:  # noqa: BLE001 - the timeout is what gets reported
                pass
            return f"command timed out after {timeout:g}s and was interrupted", None
        except BashIncorrectSyntaxError as exc:
            return f"bash syntax error: {exc}", 2
        except (OSError, aiohttp.ClientError, SwerexException, ToolServerBroke):
            raise
        except Exception as exc:  # noqa: BLE001 - a reply of the wrong shape (pydantic, JSON): the server broke
            raise ToolServerBroke(f"{type(exc).__name__}: {str(exc)[:TRANSFER_MESSAGE_MAX]}") from None


def _count(value: object) -> int:
    """A token count as the endpoint gave it (0 where it is not a number)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        return 0  # NaN, inf and 4,300-digit counts too (R14a's lead, R15d-1)
    return int(value)


def _call(call: object) -> tuple[str, str | None, str | None]:
    """A tool call as the model wrote it: its id, its tool's name, and a bash command where its arguments are
    JSON holding a string `command` (None otherwise). Whatever shape the model gives it, the model is told, and
    the run goes on: a malformed call is the attempt's own, never an error of the machinery (red team 13, R13-1:
    `{"command": 5}` escaped swe-rex's schema as an internal error, which `--retry-errors` redid)."""
    if not isinstance(call, dict):
        return "", None, None
    raw_id = call.get("id")
    call_id = raw_id if isinstance(raw_id, str) else ""
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return call_id, None, None
    args = fn.get("arguments") or "{}"
    try:
        parsed = json.loads(args) if isinstance(args, str) else args
    except ValueError:
        parsed = None
    command = parsed.get("command") if isinstance(parsed, dict) else None
    return call_id, fn["name"], command if isinstance(command, str) else None


class ConversationRefused(Exception):
    """The endpoint answers, and failed this conversation: the attempt brought it on itself (`model_refused`)."""


class ProbeOutOfTime(Exception):
    """The run's time ran out while the probe waited on an endpoint still alive (`time_limit`)."""


def _endpoint_answers(cfg: ApiAgentConfig, api_key: str | None, first: list[dict], failure: ModelError,
                      left_s: float) -> bool | None:
    """Whether the endpoint still answers the run's first request (the system prompt and the instruction, which
    the agent cannot change), asked after a later request failed with a time-out, a 5xx or a 429 (red team 13's
    lead): then the failure may be the conversation's (a context the sandbox's output made too long to answer in
    time, or too costly for the endpoint's limits); an endpoint that fails this too is down, and the attempt is
    the machinery's error, redone. None: the run's time (`left_s`) ran out while the probe waited on an endpoint
    that still lists its models, and the run ends at its time limit, graded.

    After a 429 the probe waits what it asked for (a minute at most): a conversation that spent the endpoint's
    tokens for the minute made the probe's 429 too (red team 14's lead). The probe is one request, never
    retried, that waits as long as the run has left: an endpoint that serves requests in order and finishes
    those whose client gave up answers it only after the conversation's abandoned tries, each as long as the
    agent made its context, so any fixed patience is one the agent can outgrow (red teams 15d and 15h, R15d-5,
    R15h-2)."""
    t0 = time.monotonic()
    if failure.status == 429:
        time.sleep(min(failure.retry_after if failure.retry_after is not None else RATE_WINDOW_S, max(left_s, 0)))
    left_s -= time.monotonic() - t0
    try:
        if left_s <= 1:
            raise ModelError("no time left to ask", timed_out=True)
        chat(cfg.model_copy(update={"request_retries": 0, "request_timeout_s": left_s}), api_key, first)
    except ModelError as exc:
        # no answer before the run's time ran out: the time limit, graded, when the endpoint is alive (it lists its
        # models); an endpoint that does not even do that is down, the machinery's error
        return None if exc.timed_out and lists_models(cfg, api_key) else False
    return True


def _sandbox_there(box: Sandbox) -> bool:
    """Whether the host still reaches the sandbox (dockerd's archive of /testbed, no process inside it: the
    candidate, root there, can break `exec`, red team 13, R13-2): then a tool server that stopped answering was
    stopped from inside, and its tree can be graded."""
    try:
        box.read_file(f"/.sweserve-probe-{uuid.uuid4().hex}", max_bytes=1)  # a name nothing inside can know
    except LimitExceeded:
        return True
    except Exception:  # noqa: BLE001 - a sandbox the host cannot reach is the machinery's failure
        return False
    return True


class ApiAgent(TaskImageAgent):
    def __init__(self, cfg: ApiAgentConfig, env=os.environ):
        self.cfg = cfg
        self.name = cfg.name
        self.api_key = env.get(cfg.api_key_env) if cfg.api_key_env else None

    def secrets(self) -> list[str]:
        """The API key: redacted from everything the trial records."""
        return [self.api_key] if self.api_key else []

    def config_hash(self) -> str:
        return hashlib.sha256(self.cfg.model_dump_json(exclude={"name"}).encode()).hexdigest()[:16]

    def _cost(self, run: AgentRun) -> float | None:
        p = self.cfg.price
        if p is None:
            return None
        return (run.prompt_tokens * p.prompt_per_mtok + run.completion_tokens * p.completion_per_mtok) / 1e6

    def _ask(self, messages: list[dict], run: AgentRun, t0: float, timeout_s: float) -> dict:
        """The next step's answer. A failure after a first answer is the conversation's (`ConversationRefused`)
        when the endpoint refused it as malformed or too large, or when it still answers the run's first request
        (`_endpoint_answers`) and then fails the conversation once more: a blip that passed (a 5xx of a restart,
        a 429 of other runs sharing the key) costs an honest run nothing. A failure of the first request, or an
        endpoint that fails the probe too, stays a `ModelError`, the machinery's (red team 15h's lead)."""
        try:
            return chat(self.cfg, self.api_key, messages)
        except ModelError as exc:
            if not run.steps:
                raise
            if exc.status in CONVERSATION_REFUSALS:
                raise ConversationRefused(str(exc)) from None
            answers = _endpoint_answers(self.cfg, self.api_key, messages[:2], exc,
                                        timeout_s - (time.monotonic() - t0))
            if answers is None:
                raise ProbeOutOfTime(str(exc)) from None
            if not answers:
                raise
        try:
            return chat(self.cfg, self.api_key, messages)
        except ModelError as exc:
            raise ConversationRefused(str(exc)) from None

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        cfg, t0 = self.cfg, time.monotonic()
        run = AgentRun(agent=cfg.name, version=cfg.version, model=cfg.model, usage_from="host")
        messages = [{"role": "system", "content": cfg.system_prompt or SYSTEM_PROMPT},
                    {"role": "user", "content": bundle.instruction}]
        # the loop checks the limit between steps; a tool server stopped from inside (SIGSTOP) would hold a step
        # for minutes: the host's clock kills the sandbox at the limit, which ends any request in flight
        with box.deadline(bundle.task.resources.timeout_s) as clock:
            shell: SwerexShell | None = None
            try:
                shell = SwerexShell(box)
                while True:
                    if run.steps >= cfg.max_steps:
                        run.exit_reason = "step_limit"
                        break
                    if time.monotonic() - t0 > bundle.task.resources.timeout_s:
                        run.exit_reason = "time_limit"
                        break
                    data = self._ask(messages, run, t0, bundle.task.resources.timeout_s)
                    run.steps += 1
                    usage = data.get("usage")
                    usage = usage if isinstance(usage, dict) else {}
                    run.prompt_tokens += _count(usage.get("prompt_tokens"))
                    run.completion_tokens += _count(usage.get("completion_tokens"))
                    message = data["choices"][0]["message"]
                    messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
                    calls = message.get("tool_calls") or []
                    if not calls:
                        messages.append({"role": "user", "content": "Use the bash tool, or call submit when done."})
                    submitted = False
                    for call in calls if isinstance(calls, list) else [calls]:
                        call_id, name, command = _call(call)
                        if name == "submit":
                            submitted = True
                            content = "submitted"
                        elif name == "bash":
                            if command is None:
                                content = "error: arguments must be JSON like {\"command\": \"ls\"}"
                            else:
                                output, code = shell.run(command, cfg.command_timeout_s)
                                output = output[-cfg.max_observation_chars:]
                                content = f"{output}\n[exit code: {code}]"
                        else:
                            content = f"error: unknown tool {name!r}; use bash or submit"
                        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
                    if submitted:
                        run.exit_reason = "submitted"
                        break
                    if run.prompt_tokens + run.completion_tokens >= cfg.max_tokens:
                        run.exit_reason = "token_limit"
                        break
            except ToolServerError as exc:  # at start-up, before the model ran anything
                run.exit_reason, run.error = "error", str(exc)
            except ConversationRefused as exc:
                run.exit_reason, run.log_tail = "model_refused", f"the model API refused the conversation: {exc}"
            except ProbeOutOfTime as exc:  # the probe waited out the run's time on an endpoint still alive
                run.exit_reason, run.log_tail = "time_limit", f"the model API failed the conversation: {exc}"
            except ModelError as exc:
                run.exit_reason, run.error = "error", str(exc)
            except (OSError, aiohttp.ClientError, SwerexException, ToolServerBroke) as exc:  # it broke mid-run
                why = f"tool server: {exc.__class__.__name__}: {exc}"
                if shell is not None and _sandbox_there(box):
                    run.exit_reason, run.log_tail = "tool_server_lost", f"{why} (the sandbox is still there)"
                else:
                    run.exit_reason, run.error = "error", why
        if clock.fired:  # what broke after the host stopped the sandbox is the time limit, not the agent
            run.exit_reason, run.error = "time_limit", None
        run.cost_usd = self._cost(run)
        run.wall_s = round(time.monotonic() - t0, 3)
        return run
