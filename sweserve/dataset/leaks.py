"""Leaks: statement text that gives away the oracle's code or the hidden tests.

A statement leaks when it repeats a line the oracle or the hidden tests add (a solution pasted into
the issue, an expected value copied from an assert), or names a hidden test function, test class or
test file (an instruction that lists the tests to write); when it prescribes the change component by
component (a recipe); or when it maps the fix: it names, as code, many of the existing functions whose
bodies the oracle changes, across files (a changelog that lists every call site to switch). Pure text
comparison: no repository needed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from sweserve.dataset.gaps import CODE_NAME, changed_bodies
from sweserve.dataset.patches import section_paths, split_sections

MIN_LINE_CHARS = 30  # shorter lines ("return None", "self.x = x") are too common to count as a copy
_SPACE = re.compile(r"\s+")
_TEST_DEF = re.compile(r"^\+\s*(?:async\s+)?def\s+(test\w+)|^\+\s*class\s+(Test\w+)", re.MULTILINE)
_TEST_FILE = re.compile(r"(?:^|/)((?:test_\w+|\w+_test)\.py)$")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _lines(patch: str, sign: str) -> list[str]:
    return [ln[1:] for ln in patch.splitlines() if ln.startswith(sign) and not ln.startswith(sign * 3 + " ")]


@functools.lru_cache(maxsize=64)
def _added(patch: str) -> tuple[str, ...]:
    """The lines a patch adds (not merely moves), normalized, long enough to be no accident; each once. Memoized:
    mining checks every paragraph of a statement against the same two patches."""
    removed = {_norm(ln) for ln in _lines(patch, "-")}
    found: dict[str, None] = {}
    for line in _lines(patch, "+"):
        text = _norm(line)
        if len(text) >= MIN_LINE_CHARS and text not in removed and not text.startswith(("#", '"""', "'''")):
            found[text] = None
    return tuple(found)


def copied_lines(statement: str, patch: str) -> list[str]:
    """Lines the patch adds (not merely moves) that the statement repeats, long enough to be no accident."""
    norm_statement = _norm(statement)
    return [text for text in _added(patch) if text in norm_statement]


def hidden_test_names(tests_patch: str) -> list[str]:
    """Test functions and classes the tests patch adds, and the test files it creates."""
    return list(_hidden_test_names(tests_patch))


@functools.lru_cache(maxsize=64)
def _hidden_test_names(tests_patch: str) -> tuple[str, ...]:
    names = {a or b for a, b in _TEST_DEF.findall(tests_patch)}
    for section in split_sections(tests_patch):
        if "\n--- /dev/null" not in section:
            continue  # the file exists at base: naming it gives nothing away
        for path in section_paths(section):
            if (m := _TEST_FILE.search(path)):
                names.add(m.group(1))
    return tuple(sorted(names))


def named_tests(statement: str, tests_patch: str) -> list[str]:
    return [n for n in _hidden_test_names(tests_patch)
            if n in statement and re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", statement)]


def _example(lines: list[str], what: str) -> str:
    first = lines[0] if len(lines[0]) <= 80 else lines[0][:77] + "..."
    return f"{len(lines)} line{'s' if len(lines) > 1 else ''} {what}, e.g. `{first}`"


def leak_findings(statement: str, oracle_patch: str, tests_patch: str,
                  enclosing: Callable[[str, int], str | None] | None = None) -> list[str]:
    """What in the statement gives away the solution or the hidden tests, one line each (empty: no leak).
    `enclosing`: the base files' functions by line, for the fix map (`mapped_sites`), where the caller can
    read the base."""
    findings = []
    if (lines := copied_lines(statement, oracle_patch)):
        findings.append("statement repeats " + _example(lines, "the oracle adds"))
    if (lines := copied_lines(statement, tests_patch)):
        findings.append("statement repeats " + _example(lines, "of the hidden tests"))
    if (names := named_tests(statement, tests_patch)):
        findings.append(f"statement names hidden tests: {', '.join(names[:5])}"
                        + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    if (recipe := recipe_finding(statement, oracle_patch)):
        findings.append(recipe)
    if (sites := mapped_sites(statement, oracle_patch, enclosing)):
        findings.append(f"statement maps the fix: it names {len(sites)} of the functions the oracle changes, "
                        f"in {len({f for f, _ in sites})} files: " + ", ".join(f"`{n}`" for _, n in sites[:5])
                        + (f" and {len(sites) - 5} more" if len(sites) > 5 else ""))
    return findings


# ---------------------------------------------------------------------------------------------- fix maps
# A changelog can give the fix away without a recipe's shape: "X.alloc(reqs) now reuses …", "the explicit free in
# Scheduler.get_next_batch_to_run is removed", "all call sites (A.b, C.d, E.f) are switched". What the oracle
# changes is where the work is: finding those places is the task. A problem names one or two of them (where
# it crashes, what returns the wrong value); a statement that names many, across files, has handed over the
# map. Measured on 175 mined sglang-jax tasks: the 6 statements naming 4 or more changed functions in 2 or
# more files are all squash or commit logs that describe the implementation (docs/real-repos.md).
MIN_MAPPED_SITES = 4
MIN_MAPPED_FILES = 2


def _code_named(name: str, text: str) -> bool:
    """The name is in text as code: a name that can only be code (snake_case, CamelCase, _private) as a word;
    a plain word (`free`, `reset`) only backticked, after a dot (`pool.free`) or called (`free(`)."""
    if name not in text:
        return False
    if CODE_NAME.match(name):
        return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None
    return re.search(rf"`{re.escape(name)}\b|\.{re.escape(name)}\b|(?<![\w.]){re.escape(name)}\(", text) is not None


def mapped_sites(statement: str, oracle_patch: str,
                 enclosing: Callable[[str, int], str | None] | None = None) -> list[tuple[str, str]]:
    """(file stem, name) of each existing function or class whose body the oracle changes that the statement's
    problem text names as code, when they are at least MIN_MAPPED_SITES across MIN_MAPPED_FILES files (else
    empty). A method is named by its own name, or, for a dunder (`__call__`), by its class's. `enclosing`:
    the base files' functions by line (`gaps.changed_bodies`), where the caller can read them."""
    if not oracle_patch.strip():
        return []
    problem = _problem_text(statement)
    found: dict[tuple[str, str], None] = {}
    for (stem, cls, fn) in changed_bodies(oracle_patch, enclosing):
        name = fn if fn and not (fn.startswith("__") and fn.endswith("__")) else cls
        if name and len(name) > 3 and _code_named(name, problem):
            found[(stem, name)] = None
    sites = list(found)
    if len({n for _, n in sites}) < MIN_MAPPED_SITES or len({f for f, _ in sites}) < MIN_MAPPED_FILES:
        return []
    return sites


def _problem_text(statement: str) -> str:
    """The statement without its Requirements and interface sections (they say what must hold, by name)."""
    return re.split(r"^#+\s*(?:Requirements|New interfaces)\b|<!-- sweserve:interface", statement,
                    maxsplit=1, flags=re.MULTILINE)[0]


# ------------------------------------------------------------------------------------------------ recipes
# A statement can give the fix away without a line of code: as a recipe, the change prescribed component by
# component ("- config: add intermediate_size …", "- scheduler: wire …", "X owns a buffer, and Y sizes it to
# `buckets[-1]`"). What counts as a component is read from the oracle: its changed files' folders and stems
# (and the stems' words), and the classes and functions its hunks touch or add; plus a few generic ones.
GENERIC_COMPONENTS = frozenset({"test", "doc", "ci", "bench", "benchmark", "example", "readme", "cli", "api",
                                "config", "util", "script", "workflow"})
_LABELLED = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\*\*|__)?`?([A-Za-z_][\w./{},-]{0,60}?)`?(?:\*\*|__)?\s*:"
                       r"(?:\*\*|__)?\s+(\S.*)$")
_STEP = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\*\*)?(?:add|adds|rename[sd]?|move[sd]?|change[sd]?|replace[sd]?|"
                   r"remove[sd]?|wire[sd]?|register(?:s|ed)?|extract(?:s|ed)?|split(?:s)?|drop(?:s|ped)?|"
                   r"introduce[sd]?|implement(?:s|ed)?|update[sd]?|pass(?:es)?|thread(?:s)?|plumb(?:s)?|"
                   r"hook(?:s)?|guard(?:s)?|swap(?:s)?|make|makes|use|uses|call|calls|store[sd]?|keep|keeps)\b(.*)$",
                   re.IGNORECASE)
_CODEISH = re.compile(r"`([^`]+)`|\b([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[a-z][a-z0-9]*_[\w]+|_[\w]+|"
                      r"[A-Z][a-z0-9]+[A-Z]\w*)\b")
_DEF_NAME = re.compile(r"^[-+ @].*?\b(?:def|class)\s+([A-Za-z_]\w*)")
_EXPRESSION = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]\s`]*\]|\([^)\s`]*\))")
_SYMPTOM = re.compile(r"\b(?:but|however|crash\w*|errors?|exceptions?|fail\w*|wrong|bugs?|incorrect\w*|broken|corrupt\w*|"
                      r"instead of|raises?|hangs?|mismatch\w*)\b", re.IGNORECASE)
MIN_RECIPE_ITEMS = 2  # one labelled note is not a recipe; two components, each told what to do, are


def _word(word: str) -> str:
    w = word.lower().strip("`*_ ")
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


@functools.lru_cache(maxsize=64)
def oracle_modules(oracle_patch: str) -> frozenset[str]:
    """The oracle's changed files as module words (stems and folders): where a change lies, not what it is."""
    return frozenset(oracle_components(oracle_patch, defs=False))


@functools.lru_cache(maxsize=64)
def oracle_components(oracle_patch: str, defs: bool = True) -> frozenset[str]:
    """The components the oracle changes, as words: file folders and stems (and the stems' parts), and the
    classes and functions its hunks touch or define; normalized (lower case, no plural s)."""
    words: set[str] = set()
    for line in oracle_patch.splitlines():
        if line.startswith(("+++ b/", "--- a/")):
            parts = line[6:].strip().split("/")
            stems = [re.sub(r"\.\w+$", "", p) for p in parts]
            words.update(_word(s) for s in stems if s)
            words.update(_word(w) for s in stems[-1:] for w in s.split("_") if len(w) > 2)
            words.update(_word(s.replace(".", "_")) for s in parts[-1:])
        elif not defs:
            continue
        elif (m := _DEF_NAME.match(line)) or (line.startswith("@@") and (m := re.search(r"@@.*@@.*?\b(?:def|class)\s+"
                                                                                      r"([A-Za-z_]\w*)", line))):
            words.add(_word(m[1]))
    return frozenset(words - {"", "python", "src", "srt", "__init__", "init"})


def _names_component(text: str, components: frozenset[str]) -> list[str]:
    """The code-like words of text (backticked, dotted, snake_case, CamelCase) that name a changed component."""
    found = []
    for m in _CODEISH.finditer(text):
        token = m[1] or m[2]
        for part in re.split(r"[.(/\s]", token):
            if _word(part) in components and part not in found:
                found.append(part)
    return found


def _is_component_label(label: str, components: frozenset[str]) -> bool:
    words = [w for w in re.split(r"[\s/,{}]+", label) if w]
    if not words or len(words) > 3:
        return False
    return all(_word(w) in components or _word(w) in GENERIC_COMPONENTS or _word(w.split(".")[-1]) in components
               or _word(re.sub(r"\.\w+$", "", w)) in components for w in words)


def recipe_item(line: str, oracle_patch: str) -> str | None:
    """Why a list item prescribes a change to a named component (None when it does not): an item led by a
    component the oracle changes (a file, module, folder, class or function, or `tests:`/`docs:`), or an
    imperative step ("add X to Y", "wire X into Y") that names one in code."""
    components = oracle_components(oracle_patch)
    if (m := _LABELLED.match(line)) and _is_component_label(m[1], components) and len(m[2].split()) >= 2:
        return f"led by the component '{m[1]}:'"
    if (m := _STEP.match(line)) and (named := _names_component(m[1], components)):
        return f"a step that changes `{named[0]}`"
    return None


def _oracle_expressions(text: str, oracle_patch: str) -> list[str]:
    """Code expressions of text (a subscript or a call: `buf[-1]`, `f(x)`) that only the oracle's added lines
    hold: the removed and unchanged lines around them do not."""
    added = "\n".join(_lines(oracle_patch, "+"))
    kept = "\n".join(_lines(oracle_patch, "-") + _lines(oracle_patch, " "))
    return [e for e in dict.fromkeys(_EXPRESSION.findall(text)) if len(e) >= 6 and e in added and e not in kept]


def recipe_sentence(sentence: str, oracle_patch: str) -> str | None:
    """Why a prose sentence lays out the fix across components (None when it does not): it names two or more
    components the oracle changes, in code, one of them a changed file or module (where the change goes, not
    only what the interface calls it), and repeats an expression only the oracle adds."""
    if _SYMPTOM.search(sentence):  # "`f` calls `g(x)`, but …": the bug, however it is worded
        return None
    components = oracle_components(oracle_patch)
    named = _names_component(sentence, components)
    where = _names_component(sentence, oracle_modules(oracle_patch))
    if len(named) >= 2 and where and (expr := _oracle_expressions(sentence, oracle_patch)):
        return f"places the change in {', '.join(f'`{n}`' for n in named[:3])} with the oracle's `{expr[0]}`"
    return None


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")


def recipe_steps(statement: str, oracle_patch: str) -> list[str]:
    """The parts of a statement's problem text (not its Requirements or interface sections, which say what
    must hold) that prescribe the change component by component."""
    if not oracle_patch.strip():
        return []
    problem = _problem_text(statement)
    steps = []
    paragraph: list[str] = []
    for line in problem.splitlines() + [""]:
        if _LABELLED.match(line) or _STEP.match(line):
            if recipe_item(line, oracle_patch):
                steps.append(line.strip())
            continue
        if line.strip() and not line.lstrip().startswith(("#", "|", "```")):
            paragraph.append(line.strip())
            continue
        for sentence in _SENTENCE.split(" ".join(paragraph)):
            if recipe_sentence(sentence, oracle_patch):
                steps.append(sentence.strip())
        paragraph = []
    return steps


# A changelog's bullets need no verb to give the fix away: "- per-dp-padding-aware host split in tp_worker
# (_iter_padded_input_logprob_reqs)", "- compilation_manager spec branch: use ModelWorkerSamplingInfo". An item that
# names, in code, a component the oracle changes, and says neither what goes wrong nor what must hold, is a note
# on the change. Measured on 175 mined sglang-jax tasks: the 11 statements with two or more such items are all
# changelogs (docs/real-repos.md); none of the blind reviews' good tasks has one.
_REQUIREMENT = re.compile(r"\b(?:should|must|shall|expected|needs? to|has to|have to)\b", re.IGNORECASE)


def change_items(statement: str, oracle_patch: str) -> list[str]:
    """The list items of a statement's problem text that name a component the oracle changes, in code, with no
    symptom (`_SYMPTOM`) and no requirement (`should`, `must`, `expected`)."""
    if not oracle_patch.strip():
        return []
    components = oracle_components(oracle_patch)
    return [line.strip() for line in _problem_text(statement).splitlines()
            if (m := _LIST_ITEM_START.match(line)) and not _SYMPTOM.search(line) and not _REQUIREMENT.search(line)
            and _names_component(line[m.end():], components)]


def recipe_finding(statement: str, oracle_patch: str) -> str | None:
    steps = recipe_steps(statement, oracle_patch)
    items = [s for s in steps if _LIST_ITEM_START.match(s)]
    if len(items) >= MIN_RECIPE_ITEMS or len(steps) > len(items):
        return "statement prescribes the change component by component: " + _example(steps, "of steps")
    if len(notes := change_items(statement, oracle_patch)) >= MIN_RECIPE_ITEMS:
        return "statement prescribes the change component by component: " + _example(notes, "of change notes")
    return None


_LIST_ITEM_START = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
