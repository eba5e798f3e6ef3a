"""Does a problem statement give the answer away? Lines of the oracle's added code, or the hidden tests' names.

`leak_findings` is used to discard a leaking rewrite at mining time and by `sweserve tasks lint`.
A line counts when the statement contains it whole (whitespace-insensitive) and it is long enough to
be more than boilerplate (`return None`, `else:`, `}`); a test name counts as a whole word.
"""

from __future__ import annotations

import re

MIN_LINE_CHARS = 20  # shorter added lines are too generic to call a leak

_TEST_NAME = re.compile(r"^\+\s*(?:async\s+)?def\s+(test\w*)\s*\(|^\+\s*class\s+(Test\w*)\b")


def _norm(text: str) -> str:
    return " ".join(text.split())


def added_lines(patch: str) -> list[str]:
    """The added lines of a unified diff, without the '+' and surrounding whitespace, in order, once each."""
    seen: dict[str, None] = {}
    for line in (patch or "").splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            text = _norm(line[1:])
            if text:
                seen.setdefault(text, None)
    return list(seen)


def hidden_test_names(tests_patch: str) -> list[str]:
    """Names of test functions and Test classes the tests patch adds or changes."""
    names: dict[str, None] = {}
    for line in (tests_patch or "").splitlines():
        m = _TEST_NAME.match(line)
        if m:
            names.setdefault(m[1] or m[2], None)
    return list(names)


def leak_findings(statement: str, oracle_patch: str, tests_patch: str) -> list[str]:
    """One line per leak: an oracle-added code line the statement quotes, or a hidden test name it mentions."""
    findings: list[str] = []
    flat = _norm(statement)
    for line in added_lines(oracle_patch):
        if len(line) >= MIN_LINE_CHARS and re.search(r"\w", line) and line in flat:
            findings.append(f"quotes a line the oracle patch adds: {line[:100]}")
    for name in hidden_test_names(tests_patch):
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", statement):
            findings.append(f"names a hidden test: {name}")
    return findings
