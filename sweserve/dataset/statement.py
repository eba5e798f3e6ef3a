"""Problem statements for mined tasks: what an honest solver is told, and where it came from.

Order of preference: the text of the issue(s) the PR closes (title + body, as SWE-bench does); else the
problem part of the PR description; else the squash commit's message; else the title alone. What would
tell the solver the solution or is noise is cut: PR-template headings and HTML comments, checklists,
bot blocks (CodeRabbit/Gemini/Copilot summaries, CI states), "Modifications"-style sections, accuracy
and benchmark sections, GitHub's squash sub-commit list and co-author trailers. The result's
`QualityRecord` says which source was used, how long it is, and what was noticed on the way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel

from sweserve.dataset.github import GitHubClient, PullRequestInfo
from sweserve.dataset.rewrite import Rewriter
from sweserve.models import QualityRecord, StatementSource

MAX_PART_CHARS = 6000  # one issue or description; longer ones are cut (environment dumps, logs)
MIN_SUBCOMMIT_BODY_CHARS = 80  # a squash sub-commit's body shorter than this is a fix-up note, not a description
MIN_INFORMATIVE_CHARS = 8  # letters beyond link-only lines (`Fixes #12`) for a text to count

# Sections whose heading says they describe the solution, its evaluation, or process rather than the problem.
_DROP_HEADING = re.compile(
    r"^(modifications?|changes?( made| summary| overview)?|what (this pr does|changed|i changed|'s changed)|"
    r"summary of (the )?changes|proposed changes?|implementation( details)?|approach|solution|design|"
    r"technical details|details|how( it works)?|code changes|"
    r"accuracy( tests?)?|benchmark(s|ing)?( (and|&) profiling| results)?|speed tests?( and profiling)?|"
    r"profiling|performance( results)?|perf( results)?|results?|test(s|ing)?( plan| results?| done)?|"
    r"checklist|review process|ci states|screenshots?|release notes|"
    r"summary by coderabbit|pull request overview|highlights|changelog|using gemini code assist|footnotes)"
    r"\s*(?:\(.*\))?\s*[:.]?$",
    re.IGNORECASE,
)
# Template headings over the problem itself: the heading line goes, its text stays.
_SCAFFOLD_HEADING = re.compile(r"^(motivation|description|background|problem( statement)?|why)\s*[:.]?$", re.IGNORECASE)
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BOLD = re.compile(r"^\*\*(.+?)\*\*:?\s*$")
_BOT_BLOCK = re.compile(r"<!--\s*This is an auto-generated comment.*?(?:<!--\s*end of auto-generated comment[^>]*-->|\Z)",
                        re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+\[[ xX]\]")
_BOT_LINE = re.compile(r"^\s*(?:>\s*)?(?:hello @\S+,? i'?m gemini code assist|\[!\w+\]\s*$|"
                       r"\*?\*?summary by coderabbit|<sub>.*coderabbit|🤖 generated with)", re.IGNORECASE)
_TRAILER = re.compile(r"^\s*(Co-authored-by|Signed-off-by|Reviewed-by|Change-Id|Reviewed-on|Tested-by):", re.IGNORECASE)
_SUBCOMMIT = re.compile(r"^\* \S")
_SEPARATOR = re.compile(r"^\s*-{3,}\s*$")
_LINK_ONLY = re.compile(r"^\s*(?:[-*]\s*)?(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?|part\s+of|related(?: to)?|refs?|see)\b"
                        r"(?:[\s,:]*(?:and\s+)?(?:[\w.-]*(?:/[\w.-]+)?#\d+|https?://\S+))+[\s.]*$", re.IGNORECASE)


class Statement(BaseModel):
    text: str
    quality: QualityRecord


def _heading(line: str) -> tuple[int, str] | None:
    m = _ATX.match(line)
    if m:
        return len(m[1]), m[2]
    m = _BOLD.match(line.strip())
    if m and len(m[1]) < 60:
        return 7, m[1]
    return None


def _drop_sections(lines: list[str]) -> list[str]:
    """Drop each section whose heading is solution/evaluation/process, down to the next heading of its level or above."""
    out: list[str] = []
    dropping_level: int | None = None
    in_fence = False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        head = None if in_fence else _heading(line)
        if head is not None:
            level, text = head
            if dropping_level is not None and level > dropping_level:
                continue
            dropping_level = level if _DROP_HEADING.match(text.strip(" :*_")) else None
            if dropping_level is not None:
                continue
        if dropping_level is None:
            out.append(line)
    return out


def _drop_empty_headings(lines: list[str]) -> list[str]:
    """Template headings left with nothing under them (e.g. an unfilled `## Motivation`)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        head = _heading(line)
        if head is not None:
            nxt = next((ln for ln in lines[i + 1:] if ln.strip()), None)
            nxt_head = _heading(nxt) if nxt is not None else None
            if nxt is None or (nxt_head is not None and nxt_head[0] <= head[0]):
                continue
        out.append(line)
    return out


def _tidy(lines: list[str]) -> str:
    text = "\n".join(ln.rstrip() for ln in lines).strip()
    return re.sub(r"\n{3,}", "\n\n", text)


def clean_description(text: str) -> str:
    """A PR or issue body without template scaffolding, bot blocks, checklists and solution/evaluation sections."""
    text = _BOT_BLOCK.sub("", (text or "").replace("\r\n", "\n"))
    text = _COMMENT.sub("", text)
    text = re.sub(r"<details>.*?(?:</details>|\Z)", lambda m: "" if _is_bot_details(m[0]) else m[0], text,
                  flags=re.DOTALL | re.IGNORECASE)
    lines = [ln for ln in text.split("\n") if not _CHECKBOX.match(ln) and not _BOT_LINE.match(ln)]
    lines = _drop_empty_headings(_drop_sections(lines))
    return _tidy(lines)


def _without_scaffolding(text: str) -> str:
    """A PR description or commit message as a statement: no template headings, no bare `Fixes #12` lines."""
    lines = []
    for line in text.split("\n"):
        head = _heading(line)
        if (head and _SCAFFOLD_HEADING.match(head[1].strip(" :*_"))) or _LINK_ONLY.match(line):
            continue
        lines.append(line)
    return _tidy(lines)


def _is_bot_details(block: str) -> bool:
    return bool(re.search(r"coderabbit|gemini|copilot|ci states|github-actions|\bbot\b", block, re.IGNORECASE))


def clean_commit_body(body: str) -> str:
    """A squash commit body without GitHub's sub-commit list, separators and trailers.

    GitHub's default squash body lists each commit as `* subject` followed by that commit's body. The
    subjects go; a sub-commit's body stays only when it is a paragraph (MIN_SUBCOMMIT_BODY_CHARS or more),
    not a one-line review fix-up note ("Remove unused import.")."""
    lines = [ln for ln in (body or "").replace("\r\n", "\n").split("\n")
             if not _SEPARATOR.match(ln) and not _TRAILER.match(ln)]
    chunks: list[list[str]] = [[]]
    for line in lines:
        if _SUBCOMMIT.match(line):
            chunks.append([])
        else:
            chunks[-1].append(line)
    kept = chunks[0] + [ln for chunk in chunks[1:] if len("\n".join(chunk).strip()) >= MIN_SUBCOMMIT_BODY_CHARS
                        for ln in chunk + [""]]
    return clean_description("\n".join(kept))


def is_informative(text: str) -> bool:
    """More than link lines (`Fixes #12`) and punctuation."""
    rest = "\n".join(ln for ln in text.splitlines() if not _LINK_ONLY.match(ln))
    return len(re.sub(r"[^A-Za-z]", "", rest)) >= MIN_INFORMATIVE_CHARS


def _cap(text: str, notes: list[str], what: str) -> str:
    if len(text) <= MAX_PART_CHARS:
        return text
    notes.append(f"{what} cut to {MAX_PART_CHARS} of {len(text)} characters")
    return text[:MAX_PART_CHARS].rstrip() + "\n\n[…]"


def build_statement(title: str, commit_body: str = "", pr: PullRequestInfo | None = None,
                    notes: list[str] | None = None) -> Statement:
    """The problem statement for a PR: linked issue text, else PR motivation, else commit message, else title."""
    notes = list(notes or [])
    title = (pr.title if pr else title).strip()
    issues = [i for i in (pr.issues if pr else []) if not i.is_pull_request]
    notes += [f"linked {i.label} is a pull request, not an issue; not used" for i in (pr.issues if pr else [])
              if i.is_pull_request]
    closing = [i for i in issues if i.kind == "closes"]
    umbrella = [i for i in issues if i.kind == "part_of"]
    linked = [i.label for i in (pr.issues if pr else [])]

    parts: list[str] = []
    source: StatementSource = "title_only"
    if closing:
        source = "issue"
        for issue in closing:
            body = _cap(clean_description(issue.body), notes, f"issue {issue.label}")
            parts.append(f"# {issue.title.strip()}\n\n{body}".strip())
    else:
        description = _without_scaffolding(clean_description(pr.body)) if pr else ""
        if pr and is_informative(description):
            source = "pr_description"
            parts.append(f"# {title}\n\n{_cap(description, notes, 'PR description')}")
        else:
            body = _without_scaffolding(clean_commit_body(commit_body))
            if is_informative(body):
                source = "commit_message"
                parts.append(f"# {title}\n\n{_cap(body, notes, 'commit message')}")
            else:
                parts.append(f"# {title}")
        if umbrella:
            parts.append("\n".join(f"This change is part of {i.label}: {i.title.strip()}" for i in umbrella))
    text = "\n\n".join(parts).strip() + "\n"
    return Statement(text=text, quality=QualityRecord(statement_source=source, statement_chars=len(text.strip()),
                                                      linked_issues=linked, notes=notes))


OFFLINE_NOTE = "mined without GitHub (no --github): only the commit message was available"


@dataclass
class StatementMaker:
    """Makes each mined task's statement: GitHub data when a client is given, then the optional rewrite."""

    repo: str
    github: GitHubClient | None = None
    rewriter: Rewriter | None = None

    def __call__(self, number: int, title: str, commit_body: str, oracle_patch: str, tests_patch: str) -> Statement:
        if self.github is None:
            statement = build_statement(title, commit_body, notes=[OFFLINE_NOTE])
        else:
            info, notes = self.github.pull_request(self.repo, number)
            statement = build_statement(title, commit_body, info, notes)
        if self.rewriter is not None:
            outcome = self.rewriter.rewrite(statement.text, oracle_patch, tests_patch)
            quality = statement.quality
            quality.notes.append(outcome.note)
            if outcome.text is not None:
                quality.rewritten_from, quality.statement_source = quality.statement_source, "rewritten"
                quality.statement_chars = len(outcome.text.strip())
                statement = Statement(text=outcome.text, quality=quality)
        return statement
