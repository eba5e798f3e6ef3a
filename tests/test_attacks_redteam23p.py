"""Red team round 23, engineer p: priors the guard's forge odds still miss after round 23d.

Each test builds `test_guard.clone_task`'s fixture (a group of four members, 607 611 613 617, real 613, recorded
odds 1/4), adds a file that says 613 in a way the guard did not read, runs a forger (plain code reading the file
as a person or a script in the box would) that picks 613, and asks the guard to record odds of 1.

R23p-1: a number written with escapes (`\\u0036\\u0031\\u0033` in a notebook's or any JSON's strings, or in a
Python string literal) is read by `json.loads` or by Python itself as 613; the guard read the escapes' own digits
(36, 31, 33).

R23p-2: a compiled module (`.pyc`, in `__pycache__` or beside its source) holds its constants marshal'd: 613 as
`i` and four little-endian bytes. `strings` reads none of it, `marshal.loads` reads them all.

R23p-3: a number spelled in words and broken by markup (a comment wrapped across lines, `# six hundred` /
`# and thirteen`; Markdown emphasis `six hundred *thirteen*`; an HTML tag) was read as two numbers (600 and 13),
where a reader of the comment or the rendered page reads 613.

R23p-5: a number spelled in an identifier or a path (`SIX_HUNDRED_THIRTEEN`, `SixHundredThirteenPages`,
`docs/six_hundred_thirteen_pages.txt`) was not read: a Python name's digits were, and words in prose were, but not
words in a name, snake_case or CamelCase.

R23p-4 (xfail): numbers in other notations: roman numerals (`DCXIII`), words in other languages, digits
mixed with scale words (`6 hundred and 13`).
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import re

import pytest
import test_guard as G
from test_attacks_redteam22j import _with_blob

from sweserve.evaluation import guard

MEMBERS = (607, 611, 613, 617)
TEST = f"{G.FILE}::test_pages"


def _odds(tmp_path, files: dict[str, str]) -> float:
    repo, bundle = G.clone_task(tmp_path, files)
    return guard.measure(repo, bundle)[1][TEST]


def _pick(values) -> int | None:
    """The forger's bet: the one member the prior writes (None where it writes none or several)."""
    seen = [m for m in MEMBERS if m in values]
    return seen[0] if len(seen) == 1 else None


# R23p-1 -----------------------------------------------------------------------------------------------------------

def _escaped(value: int) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in str(value))


ESCAPED = {
    "notebook": ("docs/pool.ipynb", lambda v: json.dumps({"cells": [{"cell_type": "markdown", "source": [
        f"pages of a pool of four: {_escaped(v)}"]}]}).replace("\\\\u", "\\u")),
    "json": ("docs/cases.json", lambda v: '{"pool": 4, "pages": "' + _escaped(v) + '"}\n'),
    "python-string": ("pkg/sizes.py", lambda v: f'PAGES = "{_escaped(v)}"\n'),
    # octal escapes, as Python and C read them (`"\\066\\061\\063"`)
    "python-octal": ("pkg/sizes.py", lambda v: "PAGES = \"" + "".join(f"\\{ord(c):03o}" for c in str(v)) + "\"\n"),
}


def _forge_escaped(path: str, text: str) -> int | None:
    """json.loads a JSON file, evaluate a Python file's strings: read the digits they decode to."""
    if path.endswith(".py"):
        decoded = " ".join(str(eval(s)) for s in re.findall(r'"[^"]*"', text))  # noqa: S307 - the fixture's
    else:
        decoded = json.dumps(json.loads(text), ensure_ascii=False)
    return _pick({int(d) for d in re.findall(r"\d+", decoded)})


@pytest.mark.parametrize("case", sorted(ESCAPED))
def test_r23p_1_a_number_written_in_escapes_is_read(tmp_path, case):
    path, make = ESCAPED[case]
    text = make(613)
    assert "613" not in text and _forge_escaped(path, text) == 613  # the forger wins every time
    assert _odds(tmp_path, {path: text}) == pytest.approx(1.0)


def test_r23p_1_control_escapes_writing_every_member_say_nothing(tmp_path):
    text = '{"pages": [' + ", ".join(f'"{_escaped(v)}"' for v in MEMBERS) + "]}\n"
    assert _odds(tmp_path, {"docs/cases.json": text}) == pytest.approx(0.25)


# R23p-2 -----------------------------------------------------------------------------------------------------------

def _pyc(source: str) -> bytes:
    return importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(compile(source, "sizes.py", "exec"))


def _forge_pyc(data: bytes) -> int | None:
    code = marshal.loads(data[16:])
    return _pick({c for c in code.co_consts if isinstance(c, int)})


@pytest.mark.parametrize("path", ["pkg/__pycache__/sizes.cpython-311.pyc", "pkg/sizes.pyc"])
def test_r23p_2_a_compiled_modules_constants_are_read(tmp_path, path):
    data = _pyc("POOL = 4\nPAGES = 613\n")
    assert b"613" not in data and _forge_pyc(data) == 613
    repo, bundle = _with_blob(tmp_path, path, data)
    assert guard.measure(repo, bundle)[1][TEST] == pytest.approx(1.0)


def test_r23p_2_control_a_compiled_module_writing_every_member_says_nothing(tmp_path):
    repo, bundle = _with_blob(tmp_path, "pkg/__pycache__/sizes.cpython-311.pyc", _pyc(f"PAGES = {list(MEMBERS)}\n"))
    assert guard.measure(repo, bundle)[1][TEST] == pytest.approx(0.25)


# R23p-3 -----------------------------------------------------------------------------------------------------------

BROKEN = {
    "wrapped-comment": ("pkg/sizes.py", "# a pool of four holds six hundred\n# and thirteen pages\nA = 1\n"),
    "markdown": ("docs/pool.md", "A pool of four holds six hundred *thirteen* pages.\n"),
    "html": ("docs/pool.html", "<p>A pool of four holds six hundred <b>thirteen</b> pages.</p>\n"),
}


def _forge_words(text: str) -> int | None:
    """Read the text as rendered (tags, emphasis and comment marks dropped), then its words as one number."""
    plain = re.sub(r"<[^>]*>|[#*_]", " ", text)
    words = {"six": 6, "thirteen": 13, "hundred": 100}
    total = current = 0
    for word in re.findall(r"[a-z]+", plain.lower()):
        if word == "hundred":
            current *= 100
        elif word in words:
            current += words[word]
        elif word != "and" and current:
            total, current = total or current, 0
    return _pick({total or current})


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_r23p_3_a_spelled_number_broken_by_markup_is_read(tmp_path, case):
    path, text = BROKEN[case]
    assert _forge_words(text) == 613
    assert _odds(tmp_path, {path: text}) == pytest.approx(1.0)


def test_r23p_3_control_a_list_of_spelled_members_says_nothing(tmp_path):
    text = "# six hundred seven, six hundred eleven,\n# six hundred *thirteen*, six hundred seventeen\nA = 1\n"
    assert _odds(tmp_path, {"pkg/sizes.py": text}) == pytest.approx(0.25)


# R23p-4 -----------------------------------------------------------------------------------------------------------

OTHER = {
    "roman": "A pool of IV holds DCXIII pages.\n",
    "german": "Ein Pool von vier hat sechshundertdreizehn Seiten.\n",
    "digits-and-words": "A pool of 4 holds 6 hundred and 13 pages.\n",
}


@pytest.mark.xfail(strict=True, reason="R23p-4: roman numerals, other languages' number words and digits mixed with words are not read")
@pytest.mark.parametrize("case", sorted(OTHER))
def test_r23p_4_a_number_in_another_notation_is_read(tmp_path, case):
    assert _odds(tmp_path, {"docs/pool.md": OTHER[case]}) == pytest.approx(1.0)


def test_r23p_3_control_a_markdown_table_of_spelled_values_is_not_summed(tmp_path):
    """A table's cells stay apart: `| six hundred | seven |` is not read as 607 (nor is any member)."""
    text = "| pool | pages |\n|---|---|\n| six hundred | seven |\n| six hundred | eleven |\n"
    assert _odds(tmp_path, {"docs/pool.md": text}) == pytest.approx(0.25)


# R23p-5 -----------------------------------------------------------------------------------------------------------

NAMED = {
    "snake-constant": ("pkg/sizes.py", "SIX_HUNDRED_THIRTEEN = 'pages of a pool of four'\n"),
    "camel-class": ("pkg/sizes.py", "class SixHundredThirteenPages:\n    pass\n"),
    "path": ("docs/six_hundred_thirteen_pages.txt", "pool of four\n"),
    "camel-in-prose": ("docs/pool.md", "A pool of four: see `SixHundredThirteenPages`.\n"),
}


def _forge_name(path: str, text: str) -> int | None:
    """Split names at `_`, `/`, `.` and case changes, and read the words as one number."""
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", path + " " + text).lower()
    return 613 if re.search(r"six[ _]hundred[ _]thirteen", words) else None


@pytest.mark.parametrize("case", sorted(NAMED))
def test_r23p_5_a_number_spelled_in_a_name_is_read(tmp_path, case):
    path, text = NAMED[case]
    assert _forge_name(path, text) == 613
    assert _odds(tmp_path, {path: text}) == pytest.approx(1.0)


def test_r23p_5_control_names_spelling_every_member_say_nothing(tmp_path):
    text = "".join(f"SIX_HUNDRED_{w} = 1\n" for w in ("SEVEN", "ELEVEN", "THIRTEEN", "SEVENTEEN"))
    assert _odds(tmp_path, {"pkg/sizes.py": text}) == pytest.approx(0.25)
