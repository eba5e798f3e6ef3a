"""Canary tests: randomly made tests planted among the hidden tests of every grading run.

Each file holding graded tests (every hidden test file while a task is first validated) gets 2-3 tests that
must fail and 2-3 that must pass, made to look like the file's own tests so that code in the test process
cannot tell them apart:

- names are words of the file's own test names, recombined (`test_even_split` + `test_covers_everything`
  give `test_split_covers`), never a fixed stem or suffix;
- bodies come from several generators of plain assertions over small literals and builtins (lists, strings,
  dicts, arithmetic, loops; `assert x == y`, `assert y == x`, `self.assertEqual`), with varied variable
  names: no text is common to every canary;
- each goes to a random place among the file's tests: between top-level test functions (or at the end), and
  inside test classes as a real method of the class body (its `__qualname__` names the class).

A must-fail canary that passes, a must-pass one that fails, a canary that was skipped or errored while the
other tests of its file (and class) passed, or a canary missing while its file's other tests ran, means that
something forged outcomes: the run is `tampered`. Canaries are stripped from the outcomes before anything
else reads them, so validation never records one into FAIL_TO_PASS/PASS_TO_PASS.

This copy runs only in an exported task's image, under the root verifier (sweserve_verify.py), and only where
the export ships no grading plan (made without the task's clone, for a task without twins): otherwise the
verifier plants the plan of `sweserve run` (mutation twins under fresh random names: sweserve_plan.py).
Standard library only."""

from __future__ import annotations

import ast
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

try:  # in the box this folder is on sys.path (sweserve_verify.py); on the host it is the package sweserve.harness
    import sweserve_twins
except ImportError:
    from sweserve.harness import sweserve_twins

if TYPE_CHECKING:  # stdlib only at run time: the exports' in-box verifier imports this file as it is
    from sweserve.models import Outcome, Task

_TEST_NAME = re.compile(r"^test", re.I)
_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_FALLBACK_WORDS = sweserve_twins.FALLBACK_WORDS
_RNG = secrets.SystemRandom()


@dataclass(frozen=True)
class Canary:
    file: str
    name: str
    must_pass: bool
    cls: str | None = None

    def matches(self, test_id: str) -> bool:
        """Whether a reported id is this canary: its name (and class) in its own file, whose path the id may
        give from another rootdir (`sgl_jax/test/x.py` for `python/sgl_jax/test/x.py`), never another file's."""
        at = test_id.find("[")  # an autouse fixture with params makes ids like `name[1]` (one pass, never a regex)
        test_id = test_id[:at] if at >= 0 and test_id.endswith("]") else test_id
        tail = f"::{self.cls}::{self.name}" if self.cls else f"::{self.name}"
        if not test_id.endswith(tail):
            return False
        path = test_id[: -len(tail)]
        return "::" not in path and _same_path(path, self.file)


def _same_path(a: str, b: str) -> bool:
    """One file named from two rootdirs: equal, or one a whole-component suffix of the other."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _lines(text: str, keepends: bool = False) -> list[str]:
    """text split on newlines only, as `ast` counts lines (str.splitlines also splits on form feeds and others)."""
    parts = text.split("\n")
    if not keepends:
        return parts
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@dataclass
class CanaryPlan:
    canaries: list[Canary] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # file -> its text with its canaries planted


# --- bodies ---------------------------------------------------------------------------------------------------

def _body(must_pass: bool, words: list[str], unittest_style: bool) -> list[str]:
    """Statement lines that pass (or fail) with an AssertionError: the generators `sweserve run` uses."""
    return sweserve_twins.body(_RNG, must_pass, words, unittest_style)


# --- where and what -------------------------------------------------------------------------------------------

@dataclass
class _Home:
    cls: str | None
    points: list[tuple[int, str]]  # (line index to insert before, indentation of the def)
    unittest_style: bool = False


def _start(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1


def _parametrized(nodes: list[ast.stmt], text: str) -> bool:
    """A `pytestmark` parametrize there applies to every test: canaries would lack its arguments."""
    for node in nodes:
        marks = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                     for t in node.targets)
        if marks:
            if "parametrize" in (ast.get_source_segment(text, node) or "parametrize"):
                return True
    return False


def _is_testcase(node: ast.ClassDef) -> bool:
    return any((isinstance(b, ast.Name) and b.id.endswith("TestCase")) or
               (isinstance(b, ast.Attribute) and b.attr.endswith("TestCase")) for b in node.bases)


def _homes(task: Task, file: str, text: str, tree: ast.Module, lines: list[str]) -> list[_Home]:
    """Where canaries of `file` may go: its module (pytest) and the test classes its graded tests are in (when
    nothing is graded yet, its TestCases). Decorated or parametrized classes are left alone."""
    ids = [t.split("::") for t in task.FAIL_TO_PASS + task.PASS_TO_PASS]
    graded_classes = {p[1] for p in ids if p[0] == file and len(p) == 3}
    graded_module = any(p[0] == file and len(p) == 2 for p in ids)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    homes = []
    if task.test.runner == "pytest" and (graded_module or not graded_classes) and not _parametrized(tree.body, text):
        points = [(_start(n), "") for n in tree.body if isinstance(n, (*defs, ast.ClassDef))
                  and _TEST_NAME.match(n.name)]
        homes.append(_Home(None, points + [(len(lines), "")]))
    for node in tree.body:
        if (not isinstance(node, ast.ClassDef) or not all(map(sweserve_twins.keeps_methods, node.decorator_list))
                or _parametrized(node.body, text)):
            continue
        if not (node.name in graded_classes if graded_classes else _is_testcase(node)):
            continue
        first = node.body[0]
        indent = lines[first.lineno - 1][: first.col_offset]
        if first.lineno == node.lineno or indent.strip():
            continue  # `class T: x = 1` on one line
        methods = [(_start(n), indent) for n in node.body if isinstance(n, defs) and _TEST_NAME.match(n.name)]
        homes.append(_Home(node.name, methods + [(node.end_lineno or node.lineno, indent)], _is_testcase(node)))
    return homes


def _vocabulary(names: list[str]) -> list[str]:
    return sweserve_twins.vocabulary(names)


def _name(words: list[str], taken: set[str], checks: list[str] | tuple[str, ...] = ()) -> str:
    """A canary's name from the file's words; with `checks` (what the repository's name-based selection reads,
    `sweserve_twins.selector_checks`), none of the words such a selection reads, and no name it matches beyond
    what `test_` matches: a conftest that skips `slow` tests never skips a canary beside passing neighbours."""
    pool = sweserve_twins.name_pool(list(dict.fromkeys(words)), checks) if checks else list(dict.fromkeys(words))
    want = sweserve_twins.matched("test_", checks)
    for attempt in range(200):
        if attempt == 50:  # a file with too few words for new names: borrow some
            pool = list(dict.fromkeys(pool + [w for w in _FALLBACK_WORDS if not sweserve_twins.reads(w, checks)]))
        picked = _RNG.sample(pool, _RNG.randint(2, min(4, len(pool)))) if len(pool) > 1 else pool
        name = "test_" + "_".join(picked)
        if name not in taken and sweserve_twins.matched(name, checks) == want:
            taken.add(name)
            return name
    name = f"test_{_RNG.choice(pool)}_{secrets.token_hex(3)}"
    taken.add(name)
    return name


def _code(name: str, indent: str, body: list[str], method: bool) -> str:
    inner = indent + ("\t" if "\t" in indent else "    ")
    lines = [f"{indent}def {name}({'self' if method else ''}):"] + [inner + ln for ln in body]
    return "\n".join(lines) + "\n"


def _plant(text: str, inserts: list[tuple[int, str]]) -> str:
    lines = _lines(text, keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    # at one place, methods go before top-level code (a class ending the file, then the file's end)
    for at, code in sorted(inserts, key=lambda x: (x[0], not x[1].startswith((" ", "\t"))), reverse=True):
        top_level = not code.startswith((" ", "\t"))
        block = ("\n\n" + code + "\n\n") if top_level else ("\n" + code + "\n")
        lines.insert(at, block)
    return "".join(lines)


def plan(task: Task, sources: dict[str, str], checks: dict[str, list[str]] | None = None) -> CanaryPlan:
    """Canaries for the hidden test files whose text is in `sources` (file -> text); `checks`: per file, what
    the repository's name-based selection reads in its tests' names (`_name`)."""
    graded = {t.split("::")[0] for t in task.FAIL_TO_PASS + task.PASS_TO_PASS}
    out = CanaryPlan()
    everywhere = set()  # no canary takes the name of a function in any hidden file, its own or a sibling's
    for text in sources.values():
        try:
            everywhere |= {n.name for n in ast.walk(sweserve_twins.parse_module(text)) if isinstance(n, (ast.FunctionDef,
                                                                                       ast.AsyncFunctionDef))}
        except (SyntaxError, ValueError):
            pass
    for file, text in sorted(sources.items()):
        if graded and file not in graded:
            continue
        try:
            tree = sweserve_twins.parse_module(text)
        except (SyntaxError, ValueError):
            continue  # it cannot run at all: its tests (and canaries) would be collection errors
        lines = _lines(text)
        homes = _homes(task, file, text, tree, lines)
        if not homes:
            continue
        names = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        words = _vocabulary([n for n in names if _TEST_NAME.match(n)])
        taken = everywhere | {c.name for c in out.canaries}
        inserts = []
        kinds = [False] * _RNG.randint(2, 3) + [True] * _RNG.randint(2, 3)
        _RNG.shuffle(kinds)
        for must_pass in kinds:
            home = _RNG.choice(homes)
            at, indent = _RNG.choice(home.points)
            canary = Canary(file, _name(words, taken, (checks or {}).get(file, ())), must_pass, home.cls)
            out.canaries.append(canary)
            body = _body(must_pass, words, home.unittest_style)
            inserts.append((at, _code(canary.name, indent, body, method=home.cls is not None)))
        out.texts[file] = _plant(text, inserts)
    return out


def check(canaries: list[Canary], outcomes: dict[str, Outcome],
          exit_status: int | None = None) -> tuple[dict[str, Outcome], list[str]]:
    """The outcomes without the canaries, and what the canaries say was forged (empty when nothing was).

    `exit_status` is the runner's own (pytest's or the unittest runner's): 0 while a must-fail canary ran
    and failed cannot be."""
    found: dict[Canary, Outcome] = {}
    rest: dict[str, Outcome] = {}
    for test_id, outcome in outcomes.items():
        hit = next((c for c in canaries if c.matches(test_id)), None)
        if hit is None:
            rest[test_id] = outcome
        elif hit not in found or _SEVERITY[outcome] > _SEVERITY[found[hit]]:
            found[hit] = outcome

    def same_file(c: Canary, test_id: str) -> bool:
        return "::" in test_id and _same_path(test_id.split("::")[0], c.file)

    def home_passed(c: Canary) -> bool:
        return any(o == "passed" and same_file(c, t) and (t.split("::")[1] == c.cls if c.cls else t.count("::") == 1)
                   for t, o in rest.items())

    problems = []
    for c in canaries:
        got = found.get(c)
        if got is None:
            if any(same_file(c, t) for t in rest):
                problems.append("a canary test is missing from the outcomes")
        elif not c.must_pass and got == "passed":
            problems.append("a must-fail canary test passed")
        elif c.must_pass and got == "failed":
            problems.append("a must-pass canary test failed")
        elif got != ("passed" if c.must_pass else "failed") and home_passed(c):
            problems.append("a canary test was skipped or errored while its neighbours passed")
        elif not c.must_pass and exit_status == 0:
            problems.append("the test runner exited 0 although a must-fail canary failed")
    return rest, sorted(set(problems))
