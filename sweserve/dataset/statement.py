"""Problem statements for mined tasks: what an honest solver is told, and where it came from.

A statement has the shape SWE-bench Pro gives its tasks: a **problem**, **requirements**, and (written
later by lint, see ``interface.py``) the **interface**.

- Problem: the text of the issue(s) the PR closes when it has substance; else the problem part of the PR
  description; else of the squash commit's message; else a related issue with substance; else the title.
  An issue the PR only hopes to fix ("Try to resolve #670", "Likely fixes #12"), or that is still open
  after the merge, is not one it closes. Sections are judged by their content, not only their heading:
  prose about behaviour, errors or goals is kept; code, file lists, "add X to Y" steps, benchmarks and
  accuracy tables, images, credits, checklists, process notes (draft, rebase, review) and bot blocks are
  cut, and so is any part that names a hidden test or repeats a line of the oracle or the tests.
- Requirements: what the hidden tests rely on that the problem does not say, read from the patches (a
  renamed module, a changed signature or default, a new option), phrased as requirements.

The result's ``QualityRecord`` says which source was used, how long it is, why each part was kept or
cut (``parts``), the requirements, and whether the statement may make the task ready
(``statement_eligible``, with ``statement_blockers``): not the title alone, not shorter than the profile's
minimum, no leak.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

from sweserve import pyast
from sweserve.dataset.gaps import cut_back
from sweserve.dataset.github import GitHubClient, IssueInfo, PullRequestInfo
from sweserve.dataset.leaks import hidden_test_names, leak_findings, recipe_item, recipe_sentence
from sweserve.dataset.patches import split_sections
from sweserve.dataset.rewrite import Rewriter
from sweserve.models import QualityRecord, StatementPart, StatementSource

MAX_PART_CHARS = 6000  # one issue or description; longer ones are cut (environment dumps, logs)
MIN_SUBCOMMIT_BODY_CHARS = 80  # a squash sub-commit's body shorter than this is a fix-up note, not a description
MIN_INFORMATIVE_CHARS = 8  # letters beyond link-only lines (`Fixes #12`) for a text to count
MIN_SUBSTANCE_LETTERS = 80  # letters an issue's kept body needs to be the problem (else the PR text wins)
MIN_STATEMENT_CHARS = 150  # the default minimum; profiles set their own (min_statement_chars)
MAX_ISSUE_CODE_LINES = 25  # an issue's code block (a reproduction) longer than this is a log, and is cut
EXCERPT_CHARS = 60

# Headings over the solution or its evaluation: cut from PR descriptions and commit messages.
_SOLUTION_HEADING = re.compile(
    r"^(modifications?|modify|outline|changes?( made| summary| overview)?|what( this pr does| changed| i changed|'s changed| does "
    r"this pr do)?|summary of (the )?changes|proposed changes?|key changes?|implementation( details)?|approach|"
    r"solution|design|technical details|details|how( it works)?|code changes|files?( changed| touched| modified)?|"
    r"changed files)\s*(?:\(.*\))?\s*[:.]?$", re.IGNORECASE)
# Headings over evaluation or process: cut from every source.
_EVALUATION_HEADING = re.compile(
    r"^(accuracy( tests?)?|benchmark(s|ing)?( (and|&) profiling| results)?|speed tests?( and profiling)?|"
    r"profiling|performance( results)?|perf( results)?|results?|verification|validation|precision( tests?)?|"
    r"test(s|ing)?( plan| results?| done)?|how to test|checklist|review process|ci states|screenshots?|"
    r"release notes|credits?|acknowledge?ments?|related (issues?|prs?|pull requests?)|notes? (for|to) reviewers?|"
    r"todo|next steps?|follow[- ]?ups?|future work|environment|summary by coderabbit|pull request overview|"
    r"highlights|changelog|using gemini code assist|footnotes|usage|how to (run|use|tune|benchmark)\b.*|"
    r"using `?[\w./-]+`? (for|to) .*|(auto-?)?tuning\b.*|installation|install(ing)?\b.*|setup|"
    r"(\w+ )?build( and (cache|install))?|dependencies)\s*(?:\(.*\))?\s*[:.]?$", re.IGNORECASE)
# Template headings over the problem itself: the heading line goes, its text is judged by content.
_SCAFFOLD_HEADING = re.compile(r"^(motivation|description|background|problem( statement)?|why|summary|overview|"
                               r"rationale|context|goals?|describe the bug|bug description|feature request|"
                               r"the problem|issue)\s*[:.]?$", re.IGNORECASE)
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BOLD = re.compile(r"^\*\*(.+?)\*\*:?\s*$")
_BOT_BLOCK = re.compile(r"<!--\s*This is an auto-generated comment.*?(?:<!--\s*end of auto-generated comment[^>]*-->|\Z)",
                        re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+\[[ xX]\]")
_BOT_LINE = re.compile(r"^\s*(?:>\s*)?(?:hello @\S+,? i'?m gemini code assist|"
                       r"\*?\*?summary by coderabbit|<sub>.*coderabbit|🤖 generated with)", re.IGNORECASE)
_ALERT = re.compile(r"^\s*>\s*\[!(note|tip|important|warning|caution)\]\s*$", re.IGNORECASE)
_TRAILER = re.compile(r"^\s*(Co-authored-by|Signed-off-by|Reviewed-by|Change-Id|Reviewed-on|Tested-by):", re.IGNORECASE)
_SUBCOMMIT = re.compile(r"^\* \S")
# a commit subject in a list at any depth, with the number GitHub appends to a squash subject: a cherry-pick's list
# of the commits it brings (`    * [RPA] Reduce VREG spill by optimize masking (#818)`) describes no behaviour
_LISTED_SUBJECT = re.compile(r"^\s*[*-]\s+\S.*\(#\d+\)\s*$")
# `git log` headers pasted into a squash message: a commit's hash, author, date (no problem in any of them)
_GIT_LOG = re.compile(r"^\s*(?:commit [0-9a-f]{7,40}(?:\s+\(.*\))?|Merge:(?:\s+[0-9a-f]{7,40}){2,}|"
                      r"Author:\s.*<[^<>\s]*>|(?:Author|Commit)?Date:\s+\w{3},? \w{3} \d{1,2} [\d:]+ \d{4}.*)\s*$")
_DROPPED_LINES = ((_CHECKBOX, "checklist"), (_BOT_LINE, "bot text"), (_GIT_LOG, "git log header"))  # line, why
_SEPARATOR = re.compile(r"^\s*-{3,}\s*$")
_LINK_ONLY = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*)?(?:(?:likely|partially|partly|maybe|try to|trying to|attempts? to|"
                        r"should)\s+)?(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?|part\s+of|related(?: to)?|refs?|see)\b"
                        r"(?:\*\*)?(?:[\s,:]*(?:and\s+)?(?:[\w.-]*(?:/[\w.-]+)?#\d+|https?://\S+))+(?:\*\*)?[\s.]*$",
                        re.IGNORECASE)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|<img\b[^>]*>|<video\b[^>]*>(?:.*?</video>)?", re.IGNORECASE | re.DOTALL)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\betc\.)(?<!\bcf\.)(?<=[.!?])\s+(?=\S)")

# What a sentence or item is, judged by its words.
_CREDIT = re.compile(r"\b(credits?|thanks|thank you|kudos|shout[- ]?out|inspired by|co-?authored|courtesy of)\b",
                     re.IGNORECASE)
_PROCESS = re.compile(
    r"(?:^\W*rebas(?:e|ed|ing)\b|\brebased? (?:on|onto) (?:top of )?(?:the )?(?:latest )?(?:main|master|upstream)\b|"
    r"\bneeds? (?:a )?rebase|\bafter (?:a |the )?rebase)|\bdraft (?:pr|for|version)\b|"
    r"\b(?:this is|still|marked as|opened as) (?:a )?draft\b|\[draft\]|"
    r"\b(wip|depends on|merge (it )?(after|before|once)|follow[- ]?up prs?|split (from|out of)|"
    r"cherry[- ]?pick(ed)?|ready for review|early (interface )?review|do not merge|ptal|please review|"
    r"adapted from (pr|#)|make prs? small|will (send|open|submit) (a |another )?(separate |follow[- ]?up )?pr|"
    r"in a (separate|later|follow[- ]?up) pr|this pr (is|was) (split|stacked)|stacked on|ci (is )?(green|red|passing)|"
    r"/tag-and-rerun-ci|rerun|pre-commit|lint(ing)? fix)\b", re.IGNORECASE)
_MEASURE_WORD = re.compile(
    r"\b(gsm8k|mmlu|aime\d*|accuracy|throughput|tok(en)?s?/s|ttft|itl|tpot|latency|wer|cer|speed-?up|qps|rps|"
    r"benchmark(ed|s)?|bench_\w+|score|p50|p90|p99|ms|sec(onds)?|x faster|%)\b", re.IGNORECASE)
_SOLUTION_VERB = (r"(?:add|adds|added|adding|introduc\w*|implement\w*|refactor\w*|mov(?:e|es|ed|ing)|renam\w*|"
                  r"replac\w*|updat\w*|chang(?:e|es|ed|ing)|remov\w*|delet\w*|extract\w*|wir(?:e|es|ed|ing)|"
                  r"pass(?:es|ed|ing)?|us(?:e|es|ed|ing)|call(?:s|ed|ing)?|mak(?:e|es|ing)|made|switch\w*|split\w*|"
                  r"regist\w*|expos\w*|bump\w*|creat\w*|port(?:s|ed|ing)?|reus\w*|drop(?:s|ped|ping)?|guard\w*|"
                  r"thread(?:s|ed|ing)?|cap(?:s|ped|ping)?|subtract\w*|reserv\w*|mirror\w*|hoist\w*|convert\w*|"
                  r"wrap\w*|stor(?:e|es|ed|ing)|appl(?:y|ies|ied|ying)|set(?:s|ting)?|return\w*|rewr\w*|"
                  r"restructur\w*|consolidat\w*|unif(?:y|ies|ied)|simplif\w*|clean(?:s|ed)? up|modif\w*|adjust\w*|"
                  r"tun(?:e|es|ed|ing)|migrat\w*|plumb\w*|propagat\w*|forward(?:s|ed|ing)?|defer\w*|skip\w*|"
                  r"build(?:s|ing)?|built|insert\w*|append\w*|extend\w*|overrid\w*|inherit\w*|import\w*|"
                  r"export\w*|compute[sd]?|comput\w*|cach(?:e|es|ed|ing)|gate[sd]?|gating|route[sd]?|routing)")
_NARRATION = re.compile(r"^(?:(?:this|the) (?:pr|change|patch|commit)|(?:here,?\s+)?(?:we|i)(?:'ll| will| also| now)?|"
                        r"to fix (?:this|it),?(?:\s+we)?)\s+(?:also\s+|now\s+|first\s+|then\s+)?", re.IGNORECASE)
_SOLUTION_START = re.compile(rf"^(?:now\s+|also\s+|then\s+|and\s+)?{_SOLUTION_VERB}\b", re.IGNORECASE)
# Verbs of how, not what: with a code name after them, a sentence in prose prescribes the implementation.
# ("Register `Qwen2ForCausalLM`" or "Return all of them" say what must hold, and stay.)
_IMPL_STEMS = ("replace refactor move extract wire pass use call switch split hoist thread subtract reserve mirror plumb "
               "propagate forward guard convert wrap rewrite restructure consolidate inline swap cache gate route "
               "defer reuse port bump tune change update store insert append compute delete remove drop set cap "
               "unify simplify modify").split()


def _verb_forms(stems) -> str:
    forms = set()
    for stem in stems:
        forms.add(stem)
        if stem.endswith("y"):
            forms |= {stem[:-1] + "ies", stem[:-1] + "ied"}
        elif stem.endswith("e"):
            forms |= {stem + "s", stem + "d"}
        else:
            forms |= {stem + "s", stem + "es", stem + "ed", stem + stem[-1] + "ed"}
    return "|".join(sorted(forms, key=len, reverse=True))


_IMPL_START = re.compile(rf"^(?:now\s+|also\s+|then\s+|and\s+)?(?:{_verb_forms(_IMPL_STEMS)})\b", re.IGNORECASE)
# Any verb a change list starts its items with (goal verbs included: in a list they enumerate the change).
_STEP_STEMS = _IMPL_STEMS + ("add introduce implement register expose create build insert extend export import "
                             "restore track let keep release free allocate check validate reject retry clear reset "
                             "fix support enable disable allow ensure avoid prevent handle document refresh default "
                             "make rename raise return accept emit log align adopt apply bypass skip fall").split()
_STEP_START = re.compile(rf"^(?:now\s+|also\s+|then\s+|and\s+)?(?:{_verb_forms(_STEP_STEMS)}|made|built|kept|"
                         rf"let|set|fell|wrote|rewrote)\b", re.IGNORECASE)
_FIX_LABEL = re.compile(r"^\W*(?:fix|solution|the fix|change|changes|implementation|approach|after|now|with this "
                        r"(?:pr|change|patch))\W*:", re.IGNORECASE)
_BARE_LABEL = re.compile(r"^\s*\**([A-Za-z][\w /&-]{0,30}?)\**\s*:\**\s*$")
_ITEM_LABEL = re.compile(r"^\**([A-Za-z][\w /&-]{0,30}?)\**\s*:\**\s+\S")
_CODE_LABEL = re.compile(r"^\s*(?:\*\*)?`[^`]+`(?:\*\*)?\s*(?::|—|–|-|→|->)\s")


def _verb_first(text: str, pattern: re.Pattern) -> bool:
    """The text starts with one of pattern's verbs, not a gerund used as a subject ("Inserting a sequence …")."""
    m = pattern.match(text)
    return m is not None and not re.search(r"ing\b", m[0].split()[-1], re.IGNORECASE)


_CODE_WORD = re.compile(r"`[^`]+`|\b\w+\.\w+\(|\b\w+\(\)|\b[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b|"
                        r"\b\w+\.py\b")
_PATH = re.compile(r"^\s*(?:\*\*)?`?(?:[\w.-]+/)+(?:[\w.-]+)?`?(?:\*\*)?(?=\s|$|:|,|\s+[-—–(])|^\s*`?[\w-]+\.(?:py|pyi|"
                   r"toml|yaml|yml|json|md|rst|txt|cfg|ini|sh|cu|cuh|cc|cpp|h)`?(?=\s|$|:|,)")
_BY_CLAUSE = re.compile(r"\s+by\s+(?:\w+ing)\b.*$", re.IGNORECASE | re.DOTALL)

SOURCE_ISSUE, SOURCE_PR, SOURCE_COMMIT = "issue", "pr", "commit"


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


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"


@dataclass
class _Judge:
    """Judges one source text's parts, recording each decision."""

    source: str
    mode: str  # issue, pr or commit
    parts: list[StatementPart] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)  # hidden test names a kept part must not name
    oracle: str = ""
    tests: str = ""
    cut_next: bool = False
    cut_label: str = ""  # a bare label line ("modify:") that names the change: what follows it goes, to the next

    def record(self, section: str, kept: bool, why: str, text: str) -> None:
        self.parts.append(StatementPart(source=self.source, section=section, kept=kept, why=why,
                                        excerpt=_excerpt(text)))

    def heading_cut(self, heading: str) -> str | None:
        name = heading.strip(" :*_")
        if _EVALUATION_HEADING.match(name):
            return "evaluation or process section"
        if self.mode != SOURCE_ISSUE and _SOLUTION_HEADING.match(name):
            return "section describing the solution"
        return None

    def leak(self, text: str) -> str | None:
        if not (self.oracle or self.tests):
            return None
        found = leak_findings(text, self.oracle, self.tests)
        return f"leak: {found[0]}" if found else None

    # ---------------------------------------------------------------------------------------------

    def sentence(self, text: str) -> tuple[str | None, str]:
        """(the sentence as kept or None, why)."""
        plain = text.strip()
        if _CREDIT.search(plain):
            return None, "credit"
        if _PROCESS.search(plain):
            return None, "process note"
        if _is_measurement(plain):
            return None, "measurement (benchmark or accuracy numbers)"
        if self.mode == SOURCE_ISSUE:
            return plain, "problem prose"
        bare = plain.lstrip("*_ ")
        narrated = _NARRATION.match(bare)
        if narrated and _SOLUTION_START.match(bare[narrated.end():]):
            return None, "describes the fix"
        if _verb_first(bare, _IMPL_START) and _CODE_WORD.search(plain):
            return None, "describes the fix"
        if _CODE_LABEL.match(plain) and _IMPL_START.search(plain.split(":", 1)[-1].strip()):
            return None, "describes the fix"
        if self.oracle and (why := recipe_sentence(plain, self.oracle)):
            return None, f"describes the fix: {why}"
        by = _BY_CLAUSE.search(plain)
        if by and _CODE_WORD.search(by[0]):
            return plain[:by.start()].rstrip(" ,;:") + ".", "problem prose (the fix's 'by …' clause cut)"
        return plain, "problem prose"

    def item(self, text: str) -> tuple[str | None, str]:
        body = _LIST_ITEM.sub("", text, count=1).strip()
        if _PATH.match(body):
            return None, "file list"
        bare = body.lstrip("*_` ")
        narrated = _NARRATION.match(bare)
        if self.mode != SOURCE_ISSUE and _verb_first(bare[narrated.end():] if narrated else bare, _STEP_START):
            return None, "solution step"
        if self.mode != SOURCE_ISSUE and _CODE_LABEL.match(body):
            return None, "change to a named piece of code"
        if self.mode != SOURCE_ISSUE and self.oracle and (why := recipe_item(text, self.oracle)):
            return None, f"change to a named component ({why})"
        label = _ITEM_LABEL.match(body)
        if label and self.mode != SOURCE_ISSUE and _SOLUTION_HEADING.match(label[1].strip()):
            return None, f"labelled as the change ('{label[1].strip()}:')"
        kept, why = self.sentence(body)
        return (text if kept == body else kept), why

    def paragraph(self, section: str, lines: list[str]) -> list[str]:
        text = " ".join(ln.strip() for ln in lines)
        if self.mode != SOURCE_ISSUE and _FIX_LABEL.match(text):
            self.record(section, False, "describes the fix", text)
            self.cut_next = len(text.split()) <= 4  # a bare label ("After:"): the list under it goes too
            return []
        kept: list[str] = []
        whole = True
        for sentence in _SENTENCE_END.split(text):
            if not sentence.strip():
                continue
            out, why = self.sentence(sentence)
            if out is not None and (leak := self.leak(out)):
                out, why = None, leak
            self.record(section, out is not None, why, sentence)
            whole = whole and out == sentence.strip()
            if out is not None:
                kept.append(out)
        if whole:
            return [ln.rstrip() for ln in lines]  # nothing cut: as written, line breaks included
        return [" ".join(kept)] if kept else []

    def block(self, section: str, kind: str, lines: list[str]) -> list[str]:
        text = "\n".join(lines)
        label = _BARE_LABEL.match(text) if kind == "paragraph" else None
        if label:  # a label on its own line ("modify:", "reason:") heads the blocks after it, like a heading
            why = self.heading_cut(label[1])
            self.cut_label = label[1] if why else ""
            if why:
                self.record(section, False, why, text)
                return []
        elif self.cut_label:
            self.record(section, False, f"under the label '{self.cut_label}:'", text)
            return []
        if self.cut_next:
            self.cut_next = False
            if kind in ("list", "code", "paragraph"):
                self.record(section, False, "describes the fix (under a fix label)", text)
                return []
        if kind == "code":
            if self.mode == SOURCE_ISSUE and len(lines) - 2 <= MAX_ISSUE_CODE_LINES and not self.leak(text):
                self.record(section, True, "reproduction or error output", text)
                return lines
            self.record(section, False, "code" if self.mode != SOURCE_ISSUE else "long log or code", text)
            return []
        if kind == "table":
            self.record(section, False, "table (benchmark, accuracy or file list)", text)
            return []
        if kind == "list":
            judged = []
            for item in _items(lines):
                out, why = self.item(" ".join(ln.strip() for ln in item))
                if out is not None and (leak := self.leak(out)):
                    out, why = None, leak
                judged.append((item, out, why))
            steps = sum(why in ("solution step", "change to a named piece of code")
                        or why.startswith("change to a named component") for _, _, why in judged)
            change_list = self.mode != SOURCE_ISSUE and steps * 2 >= len(judged)
            kept = []
            for item, out, why in judged:
                if out is not None and change_list:  # most items are steps of the change: so is the rest
                    out, why = None, "in a list of the change's steps"
                self.record(section, out is not None, why, " ".join(item))
                if out is not None:
                    kept.append(out if _LIST_ITEM.match(out) else f"- {out}")
            return kept
        if kind == "quote":
            unquoted = [re.sub(r"^\s*>\s?", "", ln) for ln in lines if not _ALERT.match(ln)]
            kept = self.paragraph(section, [ln for ln in unquoted if ln.strip()])
            return [f"> {k}" for k in kept]
        return self.paragraph(section, lines)


def _items(lines: list[str]) -> list[list[str]]:
    items: list[list[str]] = []
    for line in lines:
        if _LIST_ITEM.match(line) and (not items or len(line) - len(line.lstrip()) <= 1 or not items[-1]):
            items.append([line])
        elif items:
            items[-1].append(line)
        else:
            items.append([line])
    return items


_METRIC = re.compile(r"(?<![\w.-])(?:\d+\.\d+(?![.\d])|\d+(?:\.\d+)?\s?(?:%|x(?!\d)|ms|s|us|GB|MB|GiB|tok/s|tokens/s)"
                     r"(?![\w/]))")


def _is_measurement(text: str) -> bool:
    """Benchmark or accuracy numbers: metric values (decimals, percentages, times, ratios) outside code spans,
    with a word of measurement or several of them; any number next to a benchmark's name."""
    plain = re.sub(r"`[^`]*`", " ", text)
    metrics = _METRIC.findall(plain)
    if re.search(r"\d", plain) and re.search(r"(?i)\b(gsm8k|mmlu|aime\d*|wer|cer|ttft|itl|tpot|tok/s|throughput|"
                                           r"qps|p50|p90|p99|hit_rate)\b", plain):
        return True
    if len(re.findall(r"=\s*\d", plain)) >= 2:  # "c64 = 0.955; c8 = 0.955"
        return True
    return len(metrics) >= 3 or (len(metrics) >= 2 and bool(_MEASURE_WORD.search(plain)))


def _blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(kind, lines) blocks of one section: code, table, list, quote, paragraph."""
    blocks: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.lstrip().startswith(("```", "~~~")):
            fence = line.lstrip()[:3]
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith(fence):
                j += 1
            blocks.append(("code", lines[i:j + 1]))
            i = j + 1
            continue
        kind = ("table" if line.lstrip().startswith("|") else "list" if _LIST_ITEM.match(line)
                else "quote" if line.lstrip().startswith(">") else "code" if line.startswith("    ") else "paragraph")
        j = i + 1
        while j < len(lines) and lines[j].strip():
            nxt = lines[j]
            if nxt.lstrip().startswith(("```", "~~~")):
                break
            if kind == "paragraph" and (_LIST_ITEM.match(nxt) or nxt.lstrip().startswith(("|", ">"))):
                break
            j += 1
        if kind == "list":  # a list goes on across blank lines while items follow
            while j + 1 < len(lines) and not lines[j].strip() and _LIST_ITEM.match(lines[j + 1]):
                j += 1
                while j < len(lines) and lines[j].strip():
                    j += 1
        blocks.append((kind, [ln for ln in lines[i:j]]))
        i = j
    return blocks


def _sections(lines: list[str]) -> list[tuple[tuple[int, str] | None, list[str]]]:
    """(heading, body lines) in order; the text before the first heading has heading None."""
    out: list[tuple[tuple[int, str] | None, list[str]]] = [(None, [])]
    in_fence = False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        head = None if in_fence else _heading(line)
        if head is not None:
            out.append((head, []))
        else:
            out[-1][1].append(line)
    return out


def _prepare(text: str, judge: _Judge | None) -> list[str]:
    """Bot blocks, comments, bot details, images, checklists and bot lines out; each cut recorded."""
    text = _BOT_BLOCK.sub("", (text or "").replace("\r\n", "\n"))
    text = _COMMENT.sub("", text)
    text = re.sub(r"<details>.*?(?:</details>|\Z)", lambda m: "" if _is_bot_details(m[0]) else m[0], text,
                  flags=re.DOTALL | re.IGNORECASE)

    def image(m: re.Match) -> str:
        if judge:
            judge.record("", False, "image", m[0])
        return ""

    text = _IMAGE.sub(image, text)
    lines = []
    for ln in text.split("\n"):
        why = next((why for pattern, why in _DROPPED_LINES if pattern.match(ln)), None)
        if why:
            if judge:
                judge.record("", False, why, ln)
            continue
        lines.append(ln)
    return lines


def _judged(text: str, judge: _Judge) -> list[str]:
    """The text with each section and block judged: what stays, headings included."""
    out: list[str] = []
    cut_level: int | None = None
    for head, body in _sections(_prepare(text, judge)):
        name = ""
        judge.cut_label = ""
        if head is not None:
            level, name = head
            if cut_level is not None and level > cut_level:
                judge.record(name, False, "inside a cut section", "\n".join(body))
                continue
            cut_level = None
            why = judge.heading_cut(name)
            if why:
                cut_level = level
                if "\n".join(body).strip():
                    judge.record(name, False, why, "\n".join(body))
                continue
        judged = [judge.block(name, kind, lines) for kind, lines in _blocks(body)]
        for i, kept_lines in enumerate(judged[:-1]):  # what a section's last block introduces is the next one
            if kept_lines and not judged[i + 1] and kept_lines[-1].rstrip().endswith(":"):
                judged[i] = _without_dangling_intro(kept_lines, name, judge)
        kept: list[str] = []
        for kept_lines in judged:
            if kept_lines:
                kept += kept_lines + [""]
        if head is not None and kept:
            out += [("#" * min(head[0], 6) if head[0] <= 6 else "###") + " " + head[1], ""]
        out += kept
    return out


_POINTER = re.compile(r"\b(?:following|below|these|this|as follows|here|numbers|results|settings|command|"
                      r"entry point)\b", re.IGNORECASE)
MAX_INTRO_WORDS = 12


def _without_dangling_intro(lines: list[str], section: str, judge: _Judge) -> list[str]:
    """A block whose last sentence introduces the part after it ("Enable it on both workers:") when that part
    was cut (code, a table, the change's steps). A bare pointer (short, or pointing: "the following",
    "below", "these numbers") goes; a sentence that states something stays, ended with a full stop."""
    last = lines[-1]
    item = _LIST_ITEM.match(last)
    if item:  # a list: its last item is the intro
        head, lead, text = lines[:-1], last[:item.end()], last[item.end():].strip()
    else:  # a paragraph or quote: the whole block, as one line
        quoted = all(ln.lstrip().startswith(">") for ln in lines if ln.strip())
        head, lead = [], "> " if quoted else ""
        text = " ".join((re.sub(r"^\s*>\s?", "", ln) if quoted else ln).strip() for ln in lines if ln.strip())
    sentences = [x for x in _SENTENCE_END.split(text) if x.strip()]
    if not sentences:
        return lines
    intro = sentences[-1]
    if len(intro.split()) > MAX_INTRO_WORDS and not _POINTER.search(intro):
        return head + [lead + " ".join(sentences[:-1] + [intro.rstrip(" :") + "."])]
    judge.record(section, False, "introduces a part that was cut", intro)
    rest = " ".join(sentences[:-1]).strip()
    return head + ([lead + rest] if rest else [])


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


def clean_description(text: str, mode: str = SOURCE_PR, judge: _Judge | None = None) -> str:
    """A PR or issue body as problem text: template scaffolding, bot blocks, checklists, images, solution
    and evaluation sections, code, file lists, solution steps, measurements, credits and process notes out."""
    judge = judge or _Judge("text", mode)
    return _tidy(_drop_empty_headings(_judged(text, judge)))


def _without_scaffolding(text: str) -> str:
    """A problem text as a statement: no template headings, no bare `Fixes #12` lines."""
    lines = []
    for line in text.split("\n"):
        head = _heading(line)
        if (head and _SCAFFOLD_HEADING.match(head[1].strip(" :*_"))) or _LINK_ONLY.match(line):
            continue
        lines.append(line)
    return _tidy(lines)


def _is_bot_details(block: str) -> bool:
    return bool(re.search(r"coderabbit|gemini|copilot|ci states|github-actions|\bbot\b", block, re.IGNORECASE))


def _subcommits_out(body: str) -> str:
    """GitHub's default squash body lists each commit as `* subject` followed by that commit's body. The
    subjects go; a sub-commit's body stays only when it is a paragraph (MIN_SUBCOMMIT_BODY_CHARS or more),
    not a one-line review fix-up note ("Remove unused import."). Subjects listed inside a body (a cherry-pick's
    commits, `    * [RPA] … (#818)`) go too."""
    lines = [ln for ln in (body or "").replace("\r\n", "\n").split("\n")
             if not _SEPARATOR.match(ln) and not _TRAILER.match(ln)
             and (_SUBCOMMIT.match(ln) or not _LISTED_SUBJECT.match(ln))]
    chunks: list[list[str]] = [[]]
    for line in lines:
        if _SUBCOMMIT.match(line):
            chunks.append([])
        else:
            chunks[-1].append(line)
    kept = chunks[0] + [ln for chunk in chunks[1:] if len("\n".join(chunk).strip()) >= MIN_SUBCOMMIT_BODY_CHARS
                        for ln in chunk + [""]]
    return "\n".join(kept)


def clean_commit_body(body: str, judge: _Judge | None = None) -> str:
    """A squash commit body without GitHub's sub-commit list, separators and trailers, judged like a PR text."""
    return clean_description(_subcommits_out(body), SOURCE_COMMIT, judge or _Judge("commit message", SOURCE_COMMIT))


def is_informative(text: str) -> bool:
    """More than link lines (`Fixes #12`) and punctuation."""
    rest = "\n".join(ln for ln in text.splitlines() if not _LINK_ONLY.match(ln))
    return len(re.sub(r"[^A-Za-z]", "", rest)) >= MIN_INFORMATIVE_CHARS


def has_substance(text: str) -> bool:
    """Enough prose to be a problem on its own (an issue that is only its title, or a line, has none)."""
    rest = "\n".join(ln for ln in text.splitlines() if not _LINK_ONLY.match(ln) and not _heading(ln))
    return len(re.sub(r"[^A-Za-z]", "", rest)) >= MIN_SUBSTANCE_LETTERS


def _cap(text: str, notes: list[str], what: str) -> str:
    if len(text) <= MAX_PART_CHARS:
        return text
    notes.append(f"{what} cut to {MAX_PART_CHARS} of {len(text)} characters")
    return cut_back(text[:MAX_PART_CHARS])[0].rstrip() + "\n\n[…]"


# ------------------------------------------------------------------------------------------------ requirements


def requirements(oracle_patch: str, tests_patch: str, problem: str = "") -> list[str]:
    """What the hidden tests rely on that the problem text does not say, read from the oracle's public
    surface: renamed modules, changed signatures (parameters, defaults, return types), new options. Only
    facts whose name the tests' added lines mention; never a test name or a line of code."""
    if not oracle_patch.strip() or not tests_patch.strip():
        return []
    test_text = "\n".join(ln[1:] for ln in tests_patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    hidden = set(hidden_test_names(tests_patch))
    out: list[str] = []

    def add(line: str, names: list[str]) -> None:
        if any(n in hidden for n in names) or all(_mentioned(n, problem) for n in names):
            return
        if line not in out:
            out.append(line)

    for old, new in _renamed_modules(oracle_patch):
        used = _used_module(new, test_text)
        if used:
            old_dotted = _dotted_like(old, used, new)
            add(f"- The module `{old_dotted}` is renamed to `{used}`: code that uses it imports it from the new "
                f"name, and the old name no longer exists.", [used.rsplit(".", 1)[-1]])
    for qualified, before, after in _changed_defs(oracle_patch):
        owner, _, fn = qualified.rpartition(".")
        # a constructor is called by its class's name; a method by its own
        called = owner if fn == "__init__" and owner else fn
        if not _mentioned(called, test_text):
            continue
        shown = f"{owner}(...)" if fn == "__init__" and owner else qualified
        for fact in _signature_facts(shown, before, after, test_text):
            add(fact, [called])
    for flag, help_text in _new_flags(oracle_patch):
        if flag in test_text:
            add(f"- A new command-line option `{flag}`" + (f": {help_text}" if help_text else "") + ".", [flag])
    return out


def _mentioned(word: str, text: str) -> bool:
    return bool(word) and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def _module_of(path: str) -> str:
    path = re.sub(r"(/__init__)?\.py$", "", path)
    return path.replace("/", ".")


def _renamed_modules(patch: str) -> list[tuple[str, str]]:
    """(old, new) module paths the oracle renames, by file and, where every file of a package moves with it,
    by package (models/wan2_1/x.py -> models/wan/x.py gives models/wan2_1 -> models/wan)."""
    pairs: list[tuple[str, str]] = []
    for section in split_sections(patch):
        old_m = re.search(r"^rename from (.+\.py)$", section, re.MULTILINE)
        new_m = re.search(r"^rename to (.+\.py)$", section, re.MULTILINE)
        if old_m and new_m:
            pairs.append((old_m[1], new_m[1]))
    folders: dict[tuple[str, str], int] = {}
    for old, new in pairs:
        o, n = old.split("/"), new.split("/")
        if o[-1] == n[-1] and len(o) == len(n):
            diff = [i for i in range(len(o) - 1) if o[i] != n[i]]
            if len(diff) == 1:
                key = ("/".join(o[:diff[0] + 1]), "/".join(n[:diff[0] + 1]))
                folders[key] = folders.get(key, 0) + 1
    out = [(o, n) for (o, n), count in folders.items()]
    moved = {p for o, n in out for p in (o,)}
    out += [(re.sub(r"(/__init__)?\.py$", "", o), re.sub(r"(/__init__)?\.py$", "", n)) for o, n in pairs
            if not any(o.startswith(m + "/") for m in moved)]
    return out


def _used_module(new_path: str, test_text: str) -> str | None:
    """The dotted name of new_path as the tests write it (its longest dotted suffix they mention)."""
    parts = _module_of(new_path).split(".")
    for i in range(len(parts) - 1):
        dotted = ".".join(parts[i:])
        if len(parts) - i >= 2 and re.search(rf"(?<![\w.]){re.escape(dotted)}(?![\w])", test_text):
            return dotted
    return None


def _dotted_like(old_path: str, used: str, new_path: str) -> str:
    """The old module's dotted name with as many parts as the tests' spelling of the new one."""
    old_parts, n = _module_of(old_path).split("."), len(used.split("."))
    extra = len(_module_of(new_path).split(".")) - n
    return ".".join(old_parts[extra:]) if extra >= 0 else ".".join(old_parts)


_DEF_START = re.compile(r"^[-+ ](\s*)(?:async\s+)?def\s+(\w+)\s*\(")
_CLASS_LINE = re.compile(r"^[-+ ](\s*)class\s+(\w+)\b")
_HUNK_CLASS = re.compile(r"^@@[^@]*@@(\s*)class\s+(\w+)\b")


def _defs(section: str, sign: str) -> dict[str, str]:
    """qualified name -> def header text as one side of a diff section has it (the lines with sign or context).
    A method is named after its class (``Pool.pop``, ``Pool.__init__``) where the diff shows the class: a
    ``class`` line above it, or the class a hunk header names."""
    lines = [ln for ln in section.splitlines()
             if (ln[:1] in (sign, " ") and not ln.startswith(("+++", "---"))) or ln.startswith("@@")]
    out: dict[str, str] = {}
    classes: list[tuple[int, str]] = []  # (indent, name) of the classes around the current line
    i = 0
    while i < len(lines):
        hunk = _HUNK_CLASS.match(lines[i])
        if lines[i].startswith("@@"):
            classes = [(len(hunk[1]) - 1 if hunk[1] else 0, hunk[2])] if hunk else []
            i += 1
            continue
        cls = _CLASS_LINE.match(lines[i])
        if cls:
            indent = len(cls[1])
            classes = [c for c in classes if c[0] < indent] + [(indent, cls[2])]
        m = _DEF_START.match(lines[i])
        if m:
            indent = len(m[1])
            classes = [c for c in classes if c[0] < indent]
            name = f"{classes[-1][1]}.{m[2]}" if indent and classes else m[2]
            header, depth, j = "", 0, i
            while j < len(lines) and j < i + 40:
                text = lines[j][1:]
                header += text.strip() + " "
                depth += text.count("(") - text.count(")")
                if depth <= 0 and text.rstrip().endswith(":"):
                    break
                j += 1
            out.setdefault(name, header.strip())
            i = j
        i += 1
    return out


def _changed_defs(patch: str) -> list[tuple[str, ast.arguments, ast.arguments | None]]:
    """(name, arguments before, after) of functions whose header the oracle changes; methods as
    ``Class.method``."""
    out = []
    for section in split_sections(patch):
        if "\n--- /dev/null" in section:
            continue
        before, after = _defs(section, "-"), _defs(section, "+")
        for name, old in before.items():
            new = after.get(name)
            if new is None or new == old:
                continue
            a, b = _parse_def(old), _parse_def(new)
            if a is not None and b is not None:
                out.append((name, a, b))
    return out


def _parse_def(header: str):
    text = header.strip()
    if not text.endswith(":"):
        return None
    try:
        node = pyast.parse_module(text + "\n    pass").body[0]
    except SyntaxError:
        return None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _signature_facts(name: str, before, after, test_text: str) -> list[str]:
    facts = []
    a, b = before.args, after.args
    old_pos = [x.arg for x in a.posonlyargs + a.args if x.arg not in ("self", "cls")]
    new_pos = [x.arg for x in b.posonlyargs + b.args if x.arg not in ("self", "cls")]
    old_all = set(old_pos) | {x.arg for x in a.kwonlyargs}
    new_kw = [x.arg for x in b.kwonlyargs]
    if old_pos != new_pos and set(old_pos) == set(new_pos):
        facts.append(f"- `{name}` takes its positional parameters in the order ({', '.join(new_pos)}).")
    else:
        added = [p for p in new_pos if p not in old_all]
        gone = [p for p in old_pos if p not in new_pos and p not in new_kw]
        if len(added) == len(gone) == 1 and new_pos.index(added[0]) == old_pos.index(gone[0]):
            facts.append(f"- `{name}`'s parameter `{gone[0]}` is renamed to `{added[0]}`.")
        else:
            defaults = _defaults(after.args)
            for p in added:
                i = new_pos.index(p)
                where = f"after `{new_pos[i - 1]}`" if i else "first"
                if p in defaults:
                    facts.append(f"- `{name}` takes a new parameter `{p}` ({where}, default `{defaults[p]}`).")
                else:
                    facts.append(f"- `{name}` takes a new positional parameter `{p}` ({where}).")
    defaults_new = _defaults(b)
    defaults_old = _defaults(a)
    for p in new_kw:
        if p not in old_all and p not in defaults_new:
            facts.append(f"- `{name}` requires a new keyword argument `{p}`.")
    for p, value in defaults_new.items():
        if p in defaults_old and defaults_old[p] != value:
            facts.append(f"- `{name}`'s `{p}` defaults to `{value}` (it was `{defaults_old[p]}`).")
    if before.returns is not None and after.returns is not None and \
            ast.unparse(before.returns) != ast.unparse(after.returns):
        facts.append(f"- `{name}` returns `{ast.unparse(after.returns)}` (it returned "
                     f"`{ast.unparse(before.returns)}`).")
    return facts


def _defaults(args: ast.arguments) -> dict[str, str]:
    positional = args.posonlyargs + args.args
    out = {p.arg: ast.unparse(d) for p, d in zip(positional[len(positional) - len(args.defaults):], args.defaults)}
    out.update({p.arg: ast.unparse(d) for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return out


_FLAG_ADDED = re.compile(r"^\+.*add_argument\(\s*[\"'](--[\w-]+)[\"'](.*)$", re.MULTILINE)


def _new_flags(patch: str) -> list[tuple[str, str]]:
    removed = set(re.findall(r"^-.*add_argument\(\s*[\"'](--[\w-]+)[\"']", patch, re.MULTILINE))
    out = []
    for m in _FLAG_ADDED.finditer(patch):
        if m[1] in removed:
            continue
        help_text = re.search(r"help\s*=\s*[\"']([^\"']{3,160})[\"']", patch[m.start():m.start() + 800])
        out.append((m[1], help_text[1].strip().rstrip(".") if help_text else ""))
    return out


# ------------------------------------------------------------------------------------------------ the statement


def _closing_issues(pr: PullRequestInfo, notes: list[str]) -> tuple[list[IssueInfo], list[IssueInfo]]:
    """(issues the PR closes, related issues): a 'closes' issue still open after the merge only relates."""
    closing, related = [], []
    for issue in pr.issues:
        if issue.is_pull_request:
            continue
        if issue.kind == "closes" and issue.state.lower() == "open":
            notes.append(f"{issue.label} is still open after the merge: related, not closed by this PR")
            related.append(issue)
        elif issue.kind == "closes":
            closing.append(issue)
        elif issue.kind == "related":
            related.append(issue)
    return closing, related


# a title's leading tags and conventional-commit type: `[Bug] `, `fix(sampler): `, `refactor!: `
_TITLE_LEAD = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*(?:[\w-]+(?:\([^)]*\))?!?:\s*)?(?:\[[^\]]*\]\s*)*")


def title_fix(title: str, oracle_patch: str = "") -> str | None:
    """Why a title prescribes the fix ("replace static-predicate `lax.cond` with `if`", "split 1-D weight_scale
    in fused QKV path"): the judge's verdict on it read as a sentence of a PR's text, past its tags; None
    when it states a problem, a goal or a feature (or is a measurement, a credit: not the fix)."""
    bare = _TITLE_LEAD.sub("", title).strip()
    if not bare:
        return None
    kept, why = _Judge("title", SOURCE_PR, oracle=oracle_patch).sentence(bare)
    return why if kept is None and why.startswith("describes the fix") else None


def heading_fix(statement: str, oracle_patch: str = "") -> str | None:
    """`title_fix` on a statement's opening `# ` heading (the title mining put there), None without one."""
    first = statement.lstrip().split("\n", 1)[0]
    return title_fix(first[2:], oracle_patch) if first.startswith("# ") else None


def build_statement(title: str, commit_body: str = "", pr: PullRequestInfo | None = None,
                    notes: list[str] | None = None, oracle_patch: str = "", tests_patch: str = "") -> Statement:
    """The problem statement for a PR: problem (issue, PR motivation, commit message, related issue, title)
    and the requirements the tests need; the parts that name hidden tests or repeat the patches are cut."""
    notes = list(notes or [])
    title = (pr.title if pr else title).strip()
    notes += [f"linked {i.label} is a pull request, not an issue; not used" for i in (pr.issues if pr else [])
              if i.is_pull_request]
    closing, related = _closing_issues(pr, notes) if pr else ([], [])
    umbrella = [i for i in (pr.issues if pr else []) if i.kind == "part_of" and not i.is_pull_request]
    linked = [i.label for i in (pr.issues if pr else [])]
    parts: list[StatementPart] = []

    def judged(text: str, source: str, mode: str) -> str:
        judge = _Judge(source, mode, oracle=oracle_patch, tests=tests_patch)
        if mode == SOURCE_COMMIT:
            out = _without_scaffolding(clean_commit_body(text, judge))
        else:
            out = _without_scaffolding(clean_description(text, mode, judge))
        out, cut = cut_back(out)
        if cut:
            judge.record("", False, "the text stops mid-sentence: cut back to its last whole sentence", cut)
        parts.extend(judge.parts)
        return out

    issue_parts = []
    for issue in closing:
        body = judged(issue.body, f"issue {issue.label}", SOURCE_ISSUE)
        issue_parts.append((issue, body))
    description = judged(pr.body, "PR description", SOURCE_PR) if pr else ""
    body_text = ""
    source: StatementSource = "title_only"
    problem: list[str] = []
    if any(has_substance(body) for _, body in issue_parts):
        source = "issue"
        for issue, body in issue_parts:
            problem.append(f"# {issue.title.strip()}\n\n{_cap(body, notes, f'issue {issue.label}')}".strip())
    else:
        for issue, _body in issue_parts:
            notes.append(f"closing issue {issue.label} has no substance beyond its title; the PR text is used")
        if pr and is_informative(description) and (has_substance(description) or not issue_parts):
            source = "pr_description"
            body_text = _cap(description, notes, "PR description")
        else:
            body = judged(commit_body, "commit message", SOURCE_COMMIT) if commit_body.strip() else ""
            rel = [(i, judged(i.body, f"issue {i.label}", SOURCE_ISSUE)) for i in related]
            rel = [(i, b) for i, b in rel if has_substance(b)]
            if is_informative(body):
                source, body_text = "commit_message", _cap(body, notes, "commit message")
            elif rel:
                source = "issue"
                issue, text = rel[0]
                notes.append(f"{issue.label} only relates to this PR; its text is used, the PR gives none")
                problem.append(f"# {issue.title.strip()}\n\n{_cap(text, notes, f'issue {issue.label}')}".strip())
            elif pr and is_informative(description):  # a short PR text still beats the title alone
                source, body_text = "pr_description", _cap(description, notes, "PR description")
        if source != "issue" and body_text and (why := title_fix(title, oracle_patch)):
            # a title that says what to change: the body states the problem, the title would hand over the fix
            parts.append(StatementPart(source="title", section="", kept=False, why=why, excerpt=_excerpt(title)))
            problem.append(body_text.strip())
        elif source != "issue":
            problem.append(f"# {title}\n\n{body_text}".strip())
            if issue_parts:
                problem.append("\n".join(f"This change addresses {i.label}: {i.title.strip()}" for i, _ in issue_parts))
        if umbrella:
            problem.append("\n".join(f"This change is part of {i.label}: {i.title.strip()}" for i in umbrella))
    text = "\n\n".join(problem).strip()
    reqs = requirements(oracle_patch, tests_patch, text)
    for req in reqs:
        parts.append(StatementPart(source="patches", section="Requirements", kept=True,
                                   why="the tests rely on it and the problem text does not say it",
                                   excerpt=_excerpt(req)))
    if reqs:
        text += "\n\n## Requirements\n\n" + "\n".join(reqs)
    text = text.strip() + "\n"
    return Statement(text=text, quality=QualityRecord(statement_source=source, statement_chars=len(text.strip()),
                                                      linked_issues=linked, labels=list(pr.labels) if pr else [],
                                                      notes=notes, parts=parts, requirements=reqs))


def eligibility(statement: Statement, oracle_patch: str, tests_patch: str, min_chars: int,
                enclosing: Callable[[str, int], str | None] | None = None) -> Statement:
    """The leak check on the whole statement, and whether it may make its task ready. `enclosing`: the base
    files' functions by line, for the fix map (`leaks.mapped_sites`)."""
    quality = statement.quality
    quality.leaks = leak_findings(statement.text, oracle_patch, tests_patch, enclosing)
    blockers = []
    if quality.statement_source == "title_only":
        blockers.append("the statement is the PR title only (mine with --github or --rewrite-with to enrich it)")
    elif quality.statement_chars < min_chars:
        blockers.append(f"the statement has {quality.statement_chars} characters, under the profile's minimum of "
                        f"{min_chars}")
    blockers += [f"at mining: {leak}" for leak in quality.leaks]
    quality.statement_blockers, quality.statement_eligible = blockers, not blockers
    return statement


OFFLINE_NOTE = "mined without GitHub (no --github): only the commit message was available"


@dataclass
class StatementMaker:
    """Makes each mined task's statement: GitHub data when a client is given, then the optional rewrite;
    every statement gets the leak check and its readiness verdict (`min_chars`: the profile's minimum)."""

    repo: str
    github: GitHubClient | None = None
    rewriter: Rewriter | None = None
    min_chars: int = MIN_STATEMENT_CHARS

    def __call__(self, number: int, title: str, commit_body: str, oracle_patch: str, tests_patch: str,
                 enclosing: Callable[[str, int], str | None] | None = None) -> Statement:
        if self.github is None:
            statement = build_statement(title, commit_body, notes=[OFFLINE_NOTE], oracle_patch=oracle_patch,
                                        tests_patch=tests_patch)
        else:
            info, notes = self.github.pull_request(self.repo, number)
            statement = build_statement(title, commit_body, info, notes, oracle_patch, tests_patch)
        if self.rewriter is not None:
            outcome = self.rewriter.rewrite(statement.text, oracle_patch, tests_patch)
            quality = statement.quality
            quality.notes.append(outcome.note)
            if outcome.text is not None:
                quality.rewritten_from, quality.statement_source = quality.statement_source, "rewritten"
                quality.statement_chars = len(outcome.text.strip())
                statement = Statement(text=outcome.text, quality=quality)
        return eligibility(statement, oracle_patch, tests_patch, self.min_chars, enclosing)
