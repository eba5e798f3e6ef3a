"""Builds the demo repository: deterministic history with one merged PR per task family.

Squash merges (`title (#N)`) and one GitHub merge commit (`Merge pull request #N`), plus a
docs-only PR, a tests-only PR and a commit that is no PR, which the miner must pass over.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sweserve.demo import files
from sweserve.gitcmd import run_git

REPO = "sweserve-demo/sglang-mini"
PROFILE = "sglang-demo"
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z; commit dates step from here so shas are reproducible


@dataclass
class PR:
    number: int
    title: str
    body: str
    changes: Mapping[str, str | None]
    merge_style: bool = False


PRS = [
    PR(101, "[Model] Add Qwen2 model support", "Register `Qwen2ForCausalLM` so Qwen2 checkpoints load.\n\n"
       "Qwen2 is Llama-shaped but has bias on the QKV projections (`attention_bias = True`) and may tie\n"
       "word embeddings (`tie_word_embeddings` in the config, default false).", files.PR_MODEL),
    PR(102, "[Fix] top-p sampling must keep at least one token",
       "`top_p_filter` drops the token that crosses the top-p threshold, so when the most likely token alone\n"
       "exceeds `top_p` nothing is kept and every probability becomes 0. Keep tokens until the cumulative\n"
       "probability reaches `top_p`, including the one that reaches it.", files.PR_SAMPLING),
    PR(103, "Fix uneven tensor-parallel shard ranges",
       "`shard_range` loses the remainder when `size` is not divisible by `world_size`: the last elements\n"
       "belong to no rank. Give the first `size % world_size` ranks one extra element each so the shards\n"
       "cover the whole dimension.", files.PR_DISTRIBUTED, merge_style=True),
    PR(104, "Support parallel tool calls in the JSON function-call parser",
       "When a model emits several `<tool_call>` blocks in one message, `parse_tool_calls` returns only the\n"
       "first. The OpenAI API allows parallel tool calls: return all of them, in order.", files.PR_SERVING),
    PR(105, "[Quant] int8: round to nearest instead of truncating",
       "`quantize_symmetric` truncates toward zero, which doubles the worst-case error. Round to the nearest\n"
       "code and clamp to the int8 range so the round-trip error is at most half a quantization step.",
       files.PR_QUANT),
    PR(106, "Fix radix cache node split losing the existing branch",
       "Inserting a sequence that diverges inside an existing edge splits the node, but the old branch is\n"
       "then unreachable: `match_prefix` of the first sequence stops at the split point. Both branches must\n"
       "stay matchable after a split.", files.PR_RADIX),
    PR(107, "Document how to run the tests", "", files.PR_DOCS),
    PR(108, "Add a greedy tie-break test", "", files.PR_TESTS_ONLY),
]


def _git(repo: Path, *args: str, step: int) -> str:
    date = f"{EPOCH + step * 3600} +0000"
    env = {
        "GIT_AUTHOR_NAME": "Demo Dev", "GIT_AUTHOR_EMAIL": "dev@sglang-mini.invalid", "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": "Demo Dev", "GIT_COMMITTER_EMAIL": "dev@sglang-mini.invalid", "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
    }
    return run_git(*args, repo=repo, env=env).decode().strip()


def _write(repo: Path, changes: Mapping[str, str | None]) -> None:
    for rel, text in changes.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def build_demo_repo(dest: Path) -> Path:
    """A fresh git repository at dest (replaced if present) with the demo history on branch main."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    step = 0
    _git(dest, "init", "-q", "-b", "main", step=step)
    _write(dest, files.INIT)
    _git(dest, "add", "-A", step=step)
    _git(dest, "commit", "-q", "-m", "Initial import of sglang-mini", step=step)
    for pr in PRS:
        step += 1
        if pr.merge_style:
            branch = "dev/" + pr.title.lower().split()[1]
            _git(dest, "checkout", "-q", "-b", branch, step=step)
            _write(dest, pr.changes)
            _git(dest, "add", "-A", step=step)
            _git(dest, "commit", "-q", "-m", pr.title, step=step)
            _git(dest, "checkout", "-q", "main", step=step)
            step += 1
            message = f"Merge pull request #{pr.number} from demo/{branch}\n\n{pr.title}\n\n{pr.body}"
            _git(dest, "merge", "-q", "--no-ff", "-m", message, branch, step=step)
            _git(dest, "branch", "-q", "-D", branch, step=step)
        else:
            _write(dest, pr.changes)
            _git(dest, "add", "-A", step=step)
            message = f"{pr.title} (#{pr.number})" + (f"\n\n{pr.body}" if pr.body else "")
            _git(dest, "commit", "-q", "-m", message, step=step)
        if pr.number == 104:  # a direct push that is no PR
            step += 1
            (dest / "python/sglang/__init__.py").write_text('__version__ = "0.0.2"\n')
            _git(dest, "commit", "-q", "-am", "bump version", step=step)
    return dest
