"""Gaps between what a statement says and what the hidden tests pin, that a static reading can see.

Each check is a lint finding (``findings``: readiness key ``lint:<kind>``, see ``readiness.finding_kind``);
each reads only the instruction and the patches, never a container.

- **truncated** — a text that stops mid-sentence. Mining cuts a source text's last paragraph back to its last
  whole sentence (``cut_back``) when it stops inside one: after a whole sentence without end punctuation, or with
  a sign of a cut (an unclosed backtick, parenthesis, bracket or fence; a last word that cannot end a sentence:
  "the", "and", a comma). Lint flags a statement where such an ending is still there (mined before the cut, or
  a cut inside the text). A missing full stop alone is not a cut: many real PR texts end without one.
- **open_question** — the statement asks what the tests decide: a question about behaviour ("Should the default
  be `cache_aware`?", "Do we want X?"), or a line marked undecided (TBD, "open question", "to be decided"),
  naming a code word (``snake_case``, ``CamelCase``, `` `code` ``, ``--flag``) that the lines tests.patch adds
  use. The tests then pin an answer the text leaves open.
- **private_numbers** — a FAIL_TO_PASS test file asserts an exact number (not 0, 1, 2 or -1, a power of ten or a
  value its own setup lines give) about a private name (``_budget``, ``obj._reserve(…)``), and the instruction
  never gives that number: it comes from a formula the solver is not told.
- **oversize_scope** — many distinct FAIL_TO_PASS test functions (parametrizations counted once), across more
  than one file, for a short problem: under ``MIN_PROBLEM_CHARS_PER_TEST`` characters of problem text per test
  function (the Requirements and interface sections not counted) once there are ``MIN_SCOPE_TESTS`` or more.
  A statement about one bug rarely specifies a whole feature's tests.
- **unstated** — the FAIL_TO_PASS test files reach (by name, or by their class's name) functions that exist at
  base and whose bodies the oracle changes, and for one of them the instruction names neither the function,
  its class, its module, nor a code word of its changed lines: the tests pin changed behaviour of code the
  solver is never pointed to (an alias rule in a helper, a formula in a class the text never mentions). What it
  cannot see: a pinned fact inside a function the text does name (an argument order, a tie-break), or in new
  code (``unstated_behaviour``; see docs/real-repos.md for what it drops on real tasks).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from sweserve.dataset.patches import new_path, split_sections

# ---------------------------------------------------------------------------------------------- truncated

_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\betc\.)(?<!\bcf\.)(?<=[.!?])\s+(?=\S)")
_ENDS_WHOLE = re.compile(r"""[.!?:;)\]}"'`*|>…]\s*$|[\u2600-\U0010ffff]\s*$""")
_DANGLING_WORDS = frozenset(
    "a an the and or but nor of to in on at by for from with into onto via than as is are was were be been "
    "that which who whose when where while if because so since until unless whether its their our your this "
    "these those such per".split())
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _unbalanced(text: str) -> bool:
    plain = re.sub(r"`[^`]*`", "", text)
    return (text.count("`") % 2 == 1 or plain.count("(") > plain.count(")")
            or plain.count("[") > plain.count("]") or plain.count("**") % 2 == 1)


def cut_mark(fragment: str) -> str | None:
    """Why fragment (a paragraph's or item's last sentence, without end punctuation) looks cut, or None."""
    text = fragment.rstrip()
    if not text or _ENDS_WHOLE.search(text):
        return None
    if _unbalanced(text):
        return "an unclosed backtick, parenthesis or bracket"
    if text.endswith((",", "-", "/", "—", "–", "=", "+", "&")):
        return f"it ends with '{text[-1]}'"
    words = re.findall(r"[A-Za-z']+", text)
    if words and words[-1].lower() in _DANGLING_WORDS and not text.endswith("`"):
        return f"it ends with '{words[-1]}'"
    return None


def _last_block(lines: list[str]) -> tuple[int, int] | None:
    """(start, end) of the last paragraph or list item among lines (end exclusive), or None when the text ends
    in a heading, a table, a code fence or nothing."""
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    if not end:
        return None
    last = lines[end - 1]
    if _HEADING.match(last) or last.lstrip().startswith("|") or _FENCE.match(last):
        return None
    start = end - 1
    while start > 0 and lines[start - 1].strip() and not _LIST_ITEM.match(lines[start]) \
            and not _HEADING.match(lines[start - 1]) and not _FENCE.match(lines[start - 1]):
        start -= 1
    return start, end


def _prose_ends_whole(lines: list[str]) -> bool:
    """The text's prose paragraphs (not list items, headings, tables or code) all end whole, and there is one."""
    ends: list[bool] = []
    para: list[str] = []
    fenced = False
    for ln in lines + [""]:
        if _FENCE.match(ln):
            fenced, para = not fenced, []
            continue
        if fenced:
            continue
        if not ln.strip() or _HEADING.match(ln) or ln.lstrip().startswith("|") or _LIST_ITEM.match(ln):
            if para and not _LIST_ITEM.match(para[0]) and not para[0].lstrip().startswith("|"):
                ends.append(bool(_ENDS_WHOLE.search(para[-1])))
            para = [ln] if ln.strip() and (_LIST_ITEM.match(ln) or ln.lstrip().startswith("|")) else []
            continue
        para.append(ln)
    return bool(ends) and all(ends)


def open_fence(lines: list[str]) -> bool:
    return sum(1 for ln in lines if _FENCE.match(ln)) % 2 == 1


def cut_back(text: str) -> tuple[str, str | None]:
    """(text ending on a whole sentence, what was cut or None). A fence left open at the end is closed (else the
    rest of the instruction, its interface section included, would read as code); a last paragraph or list
    item that stops mid-sentence loses its unfinished sentence (and goes when it has no whole one)."""
    lines = text.rstrip().split("\n")
    cut = None
    if open_fence(lines):
        lines.append("```")
        cut = "a code block left open"
        return "\n".join(lines), cut
    block = _last_block(lines)
    if block is None:
        return text, None
    start, end = block
    item = _LIST_ITEM.match(lines[start])
    lead = lines[start][:item.end()] if item else ""
    body = " ".join(ln.strip() for ln in [lines[start][len(lead):]] + lines[start + 1:end])
    sentences = [s for s in _SENTENCE_END.split(body) if s.strip()]
    if not sentences or _ENDS_WHOLE.search(sentences[-1]):
        return text, None
    mark = cut_mark(sentences[-1])
    if len(sentences) > 1:  # whole sentences before it, and this one has no end: the text stopped inside it
        mark = mark or "a sentence without its end after whole ones"
    if mark is None and not item and _prose_ends_whole(lines[:start]):
        mark = "the text's other paragraphs end with punctuation"
    if mark is None:
        return text, None
    kept = " ".join(sentences[:-1]).strip()
    new = lines[:start] + ([lead + kept] if kept else [])
    return "\n".join(new).rstrip(), f"{sentences[-1].strip()[-60:]!r} ({mark})"


_GENERATED = re.compile(r"^This change (?:addresses|is part of) \S+: ")  # lines mining adds after the texts


def truncated_finding(statement: str) -> str | None:
    """A statement (the problem part) whose last paragraph still stops mid-sentence; the lines mining adds after
    the source texts (an issue's title: "This change addresses #12: …") are not the text's end."""
    lines = statement.rstrip().split("\n")
    while lines and (not lines[-1].strip() or _GENERATED.match(lines[-1])):
        lines.pop()
    _, cut = cut_back("\n".join(lines))
    return f"statement stops mid-sentence: {cut}" if cut else None


# ---------------------------------------------------------------------------------------------- open question

_QUESTION = re.compile(r"\b(should|shall|could|would|can|do|does|is|are|what|which|whether|how|maybe|perhaps)\b",
                       re.IGNORECASE)
_UNDECIDED = re.compile(r"\b(tbd|to be (decided|determined|discussed)|open questions?|undecided|not yet decided|"
                        r"up for discussion|we (may|might|could) (want to|consider)|alternatively)\b", re.IGNORECASE)
_CODE_WORD = re.compile(r"`([^`\n]+)`|(?<![\w-])(--[a-z][\w-]*)|\b([a-z]+_[a-z0-9_]+|[A-Z][a-z0-9]+[A-Z]\w*)\b")
_WORD = re.compile(r"[\w.-]+")


def _code_words(text: str) -> set[str]:
    words = set()
    for m in _CODE_WORD.finditer(text):
        raw = m[1] or m[2] or m[3]
        for w in _WORD.findall(raw):
            w = w.strip(".-")
            if len(w) >= 3 and ("_" in w or w.startswith("--") or m[1] or re.search(r"[a-z][A-Z]", w)):
                words.add(w)
    return words


def _test_words(tests_patch: str) -> set[str]:
    added = "\n".join(ln[1:] for ln in tests_patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    return set(re.findall(r"[\w.-]+", added)) | set(re.findall(r"\w+", added))


def open_questions(statement: str, tests_patch: str) -> list[tuple[str, list[str]]]:
    """(the question or undecided line, the code words of it the added test lines use), each."""
    words = _test_words(tests_patch)
    out = []
    for para in re.split(r"\n\s*\n", statement):
        text = " ".join(ln.strip() for ln in para.splitlines())
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            s = sentence.strip()
            body = _LIST_ITEM.sub("", s).lstrip("*_> ")
            asked = s.endswith("?") and _QUESTION.match(body) is not None
            if not (asked or _UNDECIDED.search(s)):
                continue
            used = sorted(w for w in _code_words(s) if w in words or w.lstrip("-") in words)
            if used:
                out.append((s, used))
    return out


def open_question_finding(statement: str, tests_patch: str) -> str | None:
    found = open_questions(statement, tests_patch)
    if not found:
        return None
    question, used = found[0]
    return (f"statement leaves open what the tests decide: {question[:100]!r} (the tests use "
            + ", ".join(f"`{w}`" for w in used[:3]) + ")" + (f"; and {len(found) - 1} more" if len(found) > 1 else ""))


# ---------------------------------------------------------------------------------------------- private numbers

_ASSERT = re.compile(r"\b(assert\b|assert[A-Z]\w*\(|self\.assert\w*\(|np\.testing\.assert\w*\(|pytest\.approx\()")
_PRIVATE = re.compile(r"(?:\.|\b)(_[a-z][a-z0-9_]*)\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_TRIVIAL = {"0", "1", "2", "-1", "0.0", "1.0", "0.5"}


def _numbers(text: str) -> set[str]:
    return {n.replace("_", "") for n in _NUMBER.findall(re.sub(r"(['\"]).*?\1", "", text))}


def _trivial(n: str) -> bool:
    return n in _TRIVIAL or re.fullmatch(r"-?10*(?:\.0+)?", n) is not None


def private_numbers(tests_patch: str, instruction: str, test_files: set[str] | None) -> list[tuple[str, str]]:
    """(private name, number) pairs that an added assert line of a FAIL_TO_PASS test file (every test file when
    test_files is None) checks exactly, where the number is neither trivial, nor on a non-assert line the test
    file adds (its own setup), nor in the instruction."""
    given = _numbers(instruction)
    out: list[tuple[str, str]] = []
    for section in split_sections(tests_patch):
        path = new_path(section)
        if not path or not path.endswith(".py") or (test_files is not None and not _same_file(path, test_files)):
            continue
        added = [ln[1:] for ln in section.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        setup = set()
        for ln in added:
            if not _ASSERT.search(ln):
                setup |= _numbers(ln)
        for ln in added:
            code = ln.split("#", 1)[0]
            if not _ASSERT.search(code) or ("==" not in code and "Equal" not in code and "approx" not in code):
                continue
            names = [n for n in _PRIVATE.findall(code) if not n.startswith("__")]
            if not names:
                continue
            for n in sorted(_numbers(code)):
                if not _trivial(n) and n not in setup and n not in given and n.lstrip("-") not in given:
                    out.append((names[0], n))
    return list(dict.fromkeys(out))


def private_numbers_finding(tests_patch: str, instruction: str, test_files: set[str] | None) -> str | None:
    found = private_numbers(tests_patch, instruction, test_files)
    if not found:
        return None
    shown = ", ".join(f"`{name}` == {n}" for name, n in found[:3])
    return (f"tests pin exact numbers of private names the instruction never gives: {shown}"
            + (f" and {len(found) - 3} more" if len(found) > 3 else ""))


# ---------------------------------------------------------------------------------------------- oversize scope

MIN_SCOPE_TESTS = 15  # distinct FAIL_TO_PASS test functions before scope is judged
MIN_PROBLEM_CHARS_PER_TEST = 60  # about one sentence of problem per test function


def test_functions(fail_to_pass: list[str]) -> dict[str, set[str]]:
    """FAIL_TO_PASS ids as distinct test functions per file (`file::Class::test[param]` → `Class::test`)."""
    out: dict[str, set[str]] = {}
    for test_id in fail_to_pass:
        path, _, name = test_id.partition("::")
        out.setdefault(path, set()).add(re.sub(r"\[.*\]$", "", name))
    return out


def oversize_finding(problem: str, fail_to_pass: list[str]) -> str | None:
    by_file = test_functions(fail_to_pass)
    count = sum(len(v) for v in by_file.values())
    chars = len(problem.strip())
    if count < MIN_SCOPE_TESTS or len(by_file) < 2 or chars >= MIN_PROBLEM_CHARS_PER_TEST * count:
        return None
    return (f"scope larger than the statement: {count} FAIL_TO_PASS test functions in {len(by_file)} files for "
            f"{chars} characters of problem (at least {MIN_PROBLEM_CHARS_PER_TEST} a test wanted)")


# ---------------------------------------------------------------------------------------------- unstated behaviour

_DEF_OR_CLASS = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# snake_case, _private, CamelCase, UPPER_CASE
CODE_NAME = re.compile(r"^(?:_*[a-z][a-z0-9]*_\w+|_+[A-Za-z]\w+|[A-Z][a-z0-9]+[A-Z]\w*|[A-Z][A-Z0-9]*_[A-Z0-9_]+)$")


_HUNK_OLD = re.compile(r"^@@ -(\d+)")


def enclosing_def(tree: ast.Module | None, line: int) -> str | None:
    """The name of the innermost function or method of `tree` whose lines hold `line` (1-based), else None."""
    found = None
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            if found is None or node.lineno >= found.lineno:
                found = node
    return found.name if found is not None else None


def changed_bodies(oracle_patch: str, enclosing: Callable[[str, int], str | None] | None = None,
                   ) -> dict[tuple[str, str, str], set[str]]:
    """(module stem, class, function) -> code words of the changed lines, for each function or method that
    exists at base (its ``def`` is not an added line) and whose body the oracle changes. New files and new
    functions are not counted: the interface section announces those. `enclosing(path, line)`: the function
    of the base file holding a line (`enclosing_def`), for a method whose ``def`` lies above its hunk (the
    hunk's header names only the class); without it, the class stands for the method."""
    out: dict[tuple[str, str, str], set[str]] = {}
    for section in split_sections(oracle_patch):
        path = new_path(section)
        if not path or not path.endswith(".py") or "\n--- /dev/null" in section:
            continue
        stem = path.rsplit("/", 1)[-1][:-3]
        stack: list[tuple[int, str, str, bool]] = []  # (indent, kind, name, exists at base)
        old_line = 0  # the base file's line the hunk has reached
        for line in section.splitlines():
            if line.startswith("@@"):
                start = _HUNK_OLD.match(line)
                old_line = int(start[1]) - 1 if start else 0
                header = line.split("@@", 2)[-1]
                m = _DEF_OR_CLASS.match(header[1:] if header.startswith(" ") else header)
                stack = [(len(m[1]), m[2], m[3], True)] if m else []
                continue
            if line.startswith(("+++", "---", "diff ", "index ")) or line[:1] not in ("+", "-", " "):
                continue
            sign, text = line[0], line[1:]
            if sign != "+":
                old_line += 1
            if not text.strip() or text.lstrip().startswith(("#", "@")):  # a decorator belongs to the def below
                continue
            indent = len(text) - len(text.lstrip())
            m = _DEF_OR_CLASS.match(text)
            if m:
                stack = [s for s in stack if s[0] < indent] + [(indent, m[2], m[3], sign != "+")]
                continue
            stack = [s for s in stack if s[0] < indent] if indent < (stack[-1][0] + 1 if stack else 0) else stack
            if sign == " " or not stack:
                continue
            funcs = [s for s in stack if s[1] == "def"]
            cls = next((s[2] for s in reversed(stack) if s[1] == "class"), "")
            if funcs and not funcs[-1][3] or not funcs and not cls:
                continue  # a new function's body, or module-level code
            # a method whose def is above the hunk (the header names only its class): the base file names it,
            # else the class stands for it
            fn = funcs[-1][2] if funcs else (enclosing(path, max(old_line, 1)) if enclosing else None) or ""
            words = out.setdefault((stem, cls, fn), set())
            words.update(w for w in _IDENT.findall(text) if CODE_NAME.match(w))
    return out


def _f2p_words(tests_patch: str, test_files: set[str] | None) -> set[str]:
    words: set[str] = set()
    for section in split_sections(tests_patch):
        path = new_path(section)
        if not path or not path.endswith(".py") or (test_files is not None and not _same_file(path, test_files)):
            continue
        for ln in section.splitlines():  # added lines and the unchanged ones around them (a helper they call)
            if ln.startswith(("+", " ")) and not ln.startswith("+++"):
                words.update(_IDENT.findall(ln.split("#", 1)[0]))
    return words


def _same_file(path: str, test_files: set[str]) -> bool:
    """A patch path and a FAIL_TO_PASS file path name the same file (a test id may be relative to the runner's
    folder: `sgl_jax/test/x.py` for `python/sgl_jax/test/x.py`)."""
    return any(path == f or path.endswith("/" + f) or f.endswith("/" + path) for f in test_files)


def unstated_behaviour(oracle_patch: str, tests_patch: str, instruction: str,
                       test_files: set[str] | None, each: bool = True) -> list[str]:
    """Functions that exist at base, whose bodies the oracle changes, that the FAIL_TO_PASS test files reach
    (by the function's name, or its class's) and that the instruction does not point to: it names neither the
    function, its class or its module, nor a code word of its changed lines (a variable the fix touches). The
    tests then pin a changed behaviour of code the solver is never pointed to. each=False: only when the
    instruction points to none of them (measured: it fires on no reviewed task; kept for the measurement)."""
    reached = {}
    words = _f2p_words(tests_patch, test_files)
    for (stem, cls, fn), body in changed_bodies(oracle_patch).items():
        if (fn and fn in words and CODE_NAME.match(fn)) or (cls and cls in words and (
                fn in ("", "__init__") or fn in words or not fn.startswith("_"))):
            reached[(stem, cls, fn)] = body
    if not reached:
        return []
    unnamed = [(stem, cls, fn) for (stem, cls, fn), body in reached.items()
               if not any(_named(w, instruction, prose=True) for w in (fn, cls, stem) if w and len(w) > 3)
               and not any(_named(w, instruction) for w in body if len(w) > 3)]
    if not each and len(unnamed) < len(reached):
        return []
    return [f"{cls}.{fn}" if cls and fn else cls or fn for (_stem, cls, fn) in unnamed]


def _named(word: str, text: str, prose: bool = False) -> bool:
    """The word is in text as a word; or, with prose (a function's, class's or module's name), spelled in prose:
    its parts (`top_k`, `TopK`) apart, with a space or a hyphen between them ("top-k", "top k")."""
    if word in text and re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None:
        return True
    parts = [p for p in re.split(r"_+|(?<=[a-z0-9])(?=[A-Z])", word) if p]
    spelled = r"(?<![\w])" + r"[-\s]".join(map(re.escape, parts)) + r"(?![\w])"
    return prose and len(parts) > 1 and re.search(spelled, text, re.IGNORECASE) is not None


def unstated_behaviour_finding(oracle_patch: str, tests_patch: str, instruction: str,
                               test_files: set[str] | None) -> str | None:
    found = unstated_behaviour(oracle_patch, tests_patch, instruction, test_files)
    if not found:
        return None
    return ("tests reach changed code the instruction never points to: "
            + ", ".join(f"`{n}`" for n in found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else ""))
