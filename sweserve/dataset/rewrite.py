"""Optional rewriting of a problem statement into a behavioural spec by a model behind an OpenAI-compatible API.

The model sees the statement, the oracle patch and the hidden tests (so it can state the behaviour and
interface the tests check) and is asked for the observable behaviour only. Whatever it answers must
pass `leak_findings`: a rewrite that quotes the oracle's added code or names a hidden test is discarded
with a note, and so is an empty answer or a failing endpoint — mining goes on with the original.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from sweserve.agents.chat_client import ModelError, chat
from sweserve.agents.config import ApiAgentConfig, load_agent_config
from sweserve.dataset.leaks import leak_findings
from sweserve.errors import SweserveError

MAX_PATCH_CHARS = 30_000

SYSTEM_PROMPT = """\
You write problem statements for a benchmark of software-engineering tasks. You get the current \
statement of a change to a repository, the change itself (the reference solution) and the hidden tests \
that will grade a solver's attempt. Write a statement that an engineer who has the repository but not the \
solution could act on: what is wrong or missing, the observable behaviour expected afterwards, and any \
names the tests rely on (new functions, classes, arguments, options) with their meaning. Do not describe \
how to implement it, do not copy any line of the reference solution, and do not mention the tests or \
their names. Answer with the statement only, in Markdown, starting with a '# ' title line."""


class Rewrite(BaseModel):
    text: str | None = None  # None: keep the original
    note: str


class Rewriter:
    def __init__(self, cfg: ApiAgentConfig, api_key: str | None = None):
        self.cfg, self.api_key = cfg, api_key

    @classmethod
    def from_config(cls, path: Path, env=os.environ) -> Rewriter:
        cfg = load_agent_config(Path(path))
        if not isinstance(cfg, ApiAgentConfig):
            raise SweserveError(f"{path}: --rewrite-with needs an agent config of kind: api (base_url, model)")
        return cls(cfg, env.get(cfg.api_key_env) if cfg.api_key_env else None)

    def rewrite(self, statement: str, oracle_patch: str, tests_patch: str) -> Rewrite:
        user = (f"Current statement:\n\n{statement.strip()}\n\n"
                f"Reference solution (do not copy):\n```diff\n{oracle_patch[:MAX_PATCH_CHARS]}\n```\n\n"
                f"Hidden tests (do not name):\n```diff\n{tests_patch[:MAX_PATCH_CHARS]}\n```")
        messages = [{"role": "system", "content": self.cfg.system_prompt or SYSTEM_PROMPT},
                    {"role": "user", "content": user}]
        try:
            data = chat(self.cfg, self.api_key, messages)
        except ModelError as exc:
            return Rewrite(note=f"rewrite by {self.cfg.model} failed: {exc}; original kept")
        text = (data["choices"][0]["message"].get("content") or "").strip()
        if not text:
            return Rewrite(note=f"rewrite by {self.cfg.model} was empty; original kept")
        leaks = leak_findings(text, oracle_patch, tests_patch)
        if leaks:
            return Rewrite(note=f"rewrite by {self.cfg.model} discarded, it leaks: {'; '.join(leaks)[:300]}")
        return Rewrite(text=text + "\n", note=f"rewritten by {self.cfg.model}")
