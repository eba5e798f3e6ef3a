"""Agent configs (YAML): a command agent run inside the sandbox, or the built-in API agent.

Found by path, or by name in the project's `.sweserve/agents/` and then the built-in `configs/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, TypeAdapter, field_validator, model_validator

from sweserve.config_search import ConfigSearch, looks_like_path
from sweserve.errors import SweserveError
from sweserve.loading import read_data, validate_as
from sweserve.models import Strict

SUFFIXES = (".yaml", ".yml")


# a name in results and a folder name in runs/: no '/', not '.' or '..', never read as an option
AGENT_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
AGENT_NAME_RULE = "letters, digits, '_', '.' and '-' (not first), at most 100"


class _Config(Strict):
    name: str = Field(pattern=AGENT_NAME)
    version: str = ""


class CommandAgentConfig(_Config):
    """A CLI (Claude Code, Codex, Aider, mini-swe-agent, …) run in /testbed with the instruction in a file."""

    kind: Literal["command"]
    install: list[str] = Field(default_factory=list, description="shell steps baked into an agent image (with network)")
    command: str = Field(min_length=1, description="run in /testbed; the instruction is at $SWESERVE_INSTRUCTION")
    env: list[str] = Field(default_factory=list, description="host variables passed through; values never logged")
    model: str = ""
    egress: list[str] = Field(default_factory=list, description="model endpoints the sandbox may reach through the "
                              "egress proxy, as http(s)://host:port (a path is ignored); nothing else is reachable")
    closed_book: bool = Field(False, description="strip hosted tools (web search, code execution) from requests "
                              "to the egress endpoints, and refuse any model not in `models`")
    models: list[str] = Field(default_factory=list, description="with closed_book: the model names requests may ask "
                              "for (as the request's `model` field spells them); any other is refused")
    trajectory: Literal["mini-swe-agent", "claude-code", "codex"] | None = Field(
        None, description="the format of the agent's own record, copied into the trial folder and read for steps, "
        "tokens and cost: mini-swe-agent's trajectory JSON (written to $SWESERVE_TRAJECTORY), Claude Code's "
        "stream-json or Codex's --json events (its stdout)")

    @field_validator("egress")
    @classmethod
    def _origins(cls, urls: list[str]) -> list[str]:
        return [origin(url) for url in urls]

    @model_validator(mode="after")
    def _closed_book_needs_plain_http(self) -> "CommandAgentConfig":
        if self.closed_book and (not self.egress or any(url.startswith("https:") for url in self.egress)):
            raise ValueError("closed_book needs egress endpoints over plain http (the proxy does not intercept TLS, "
                             "so it cannot read requests to https endpoints)")
        if self.closed_book and not self.models:
            raise ValueError("closed_book needs `models`: the model names its requests may ask for (a model that "
                             "searches the web by its name alone, such as gpt-4o-search-preview, has no tool to strip)")
        if self.models and not self.closed_book:
            raise ValueError("`models` is read only with closed_book: true (the proxy reads no request otherwise)")
        return self


def origin(url: str) -> str:
    """An egress endpoint as the origin the proxy matches: scheme://host:port, the default port made explicit."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r}: an egress endpoint is http(s)://host:port")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{url!r}: an egress endpoint has no credentials, query or fragment")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port or (443 if parts.scheme == 'https' else 80)}"


class Price(Strict):
    prompt_per_mtok: float = Field(ge=0)
    completion_per_mtok: float = Field(ge=0)


class ApiAgentConfig(_Config):
    """The built-in tool loop against an OpenAI-compatible chat endpoint; bash runs in the sandbox via swe-rex."""

    kind: Literal["api"]
    base_url: str = Field(description="e.g. http://127.0.0.1:30000/v1 (an SGLang server)")
    model: str
    api_key_env: str | None = Field(None, description="host variable holding the API key")
    max_steps: int = Field(30, ge=1)
    max_tokens: int = Field(200_000, ge=1, description="prompt + completion tokens over the whole run")
    request_timeout_s: float = Field(120, gt=0)
    request_retries: int = Field(2, ge=0)
    command_timeout_s: float = Field(120, gt=0, le=290, description="per bash call; swe-rex caps a request at 300 s")
    max_observation_chars: int = Field(10_000, ge=100)
    temperature: float = 0.0
    price: Price | None = None
    system_prompt: str | None = None


AgentConfig = Annotated[CommandAgentConfig | ApiAgentConfig, Field(discriminator="kind")]
_ADAPTER = TypeAdapter(AgentConfig)


def load_agent_config(path) -> CommandAgentConfig | ApiAgentConfig:
    data = read_data(path, "YAML", "agent config")
    if not isinstance(data, dict):
        raise SweserveError(f"{path}: an agent config must be a mapping")
    return validate_as(_ADAPTER, data, path)


def find_agent_config(spec: str, search: ConfigSearch):
    """A config for `--agent`: a YAML path, or a name in the project's or the built-in configs; None otherwise."""
    if spec.endswith(SUFFIXES):
        path = Path(spec)
        if not path.is_file():
            raise SweserveError(f"{spec}: no such agent config")
        return path
    if looks_like_path(spec, SUFFIXES) or " " in spec:
        return None
    return search.find("agents", spec, SUFFIXES)
