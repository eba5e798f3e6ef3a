"""`--agent`: oracle, null, an agent config (path, or name in the project's or built-in configs), or a shell command."""

from __future__ import annotations

import re

from sweserve.agents.base import Agent
from sweserve.agents.config import AGENT_NAME, AGENT_NAME_RULE, ApiAgentConfig, find_agent_config, load_agent_config
from sweserve.agents.reference import NullAgent, OracleAgent
from sweserve.config_search import ConfigSearch
from sweserve.errors import SweserveError

NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def checked_name(name: str, option: str = "--agent-name") -> str:
    """An agent name given on the command line, or one clear SweserveError (never a pydantic traceback)."""
    if not re.match(AGENT_NAME, name):
        raise SweserveError(f"{option} {name!r}: an agent name is {AGENT_NAME_RULE}")
    return name


def make_agent(spec: str, name: str | None = None, search: ConfigSearch | None = None) -> Agent:
    from sweserve.agents.api import ApiAgent
    from sweserve.agents.command import CommandAgent

    if name is not None:
        checked_name(name)
    search = search or ConfigSearch.for_project()
    if spec == "oracle":
        return OracleAgent()
    if spec == "null":
        return NullAgent()
    if not spec.strip():
        raise SweserveError("--agent needs 'oracle', 'null', an agent config or a shell command")
    path = find_agent_config(spec, search)
    if path is None:
        if NAME.match(spec):  # a bare word is meant as a config name: never run it as a command by accident
            known = ", ".join(["oracle", "null", *search.names("agents", (".yaml", ".yml"))])
            raise SweserveError(f"unknown agent: {spec} (known: {known}; a shell command needs arguments or a path)")
        return CommandAgent(spec, name)
    cfg = load_agent_config(path)
    if name:
        cfg = cfg.model_copy(update={"name": name})
    if isinstance(cfg, ApiAgentConfig):
        return ApiAgent(cfg)
    return CommandAgent(cfg.command, cfg=cfg)
