"""Leaks: statement text that gives away the oracle's code or the hidden tests.

A statement leaks when it repeats a line the oracle or the hidden tests add (a solution pasted into
the issue, an expected value copied from an assert), or names a hidden test function, test class or
test file (an instruction that lists the tests to write). Pure text comparison: no repository needed.
"""

from __future__ import annotations

import functools
import re

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


def leak_findings(statement: str, oracle_patch: str, tests_patch: str) -> list[str]:
    """What in the statement gives away the solution or the hidden tests, one line each (empty: no leak)."""
    findings = []
    if (lines := copied_lines(statement, oracle_patch)):
        findings.append("statement repeats " + _example(lines, "the oracle adds"))
    if (lines := copied_lines(statement, tests_patch)):
        findings.append("statement repeats " + _example(lines, "of the hidden tests"))
    if (names := named_tests(statement, tests_patch)):
        findings.append(f"statement names hidden tests: {', '.join(names[:5])}"
                        + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    return findings
