"""Canary tests: randomly named tests added to the hidden test files of every grading run.

In each file holding graded tests (every hidden test file while a task is first validated) go one test
that must fail and one that must pass. They look like the file's own tests: their names reuse a stem of a
test in the file, their place is the file's own (module functions, or methods set on the file's test
class when its tests are methods). A must-fail canary that passes, or a canary missing while its file's
other tests ran, means something forged outcomes: the run is `tampered`. Canaries are stripped from the
outcomes before anything else reads them, so validation never records one into FAIL_TO_PASS/PASS_TO_PASS.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

from sweserve.models import Outcome, Task

_TEST_DEF = re.compile(r"^\s*def (test_[A-Za-z0-9_]+)\s*\(", re.M)
_TESTCASE = re.compile(r"^class ([A-Za-z_][A-Za-z0-9_]*)\s*\([^)]*TestCase[^)]*\)\s*:", re.M)
_ASPECTS = ["edge_cases", "roundtrip", "regression", "boundary", "small_input", "large_input", "defaults",
            "ordering", "idempotent", "empty", "single", "repeated", "mixed", "basic", "consistency"]


@dataclass(frozen=True)
class Canary:
    file: str
    name: str
    must_pass: bool
    cls: str | None = None

    def matches(self, test_id: str) -> bool:
        tail = f"::{self.cls}::{self.name}" if self.cls else f"::{self.name}"
        return test_id.endswith(tail) and "::" not in test_id[: -len(tail)]


@dataclass
class CanaryPlan:
    canaries: list[Canary] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # file -> the code appended to it


def _name(existing: list[str], taken: set[str]) -> str:
    while True:
        stem = "_".join(secrets.choice(existing).split("_")[1:3]) if existing else "behaviour"
        name = f"test_{stem}_{secrets.choice(_ASPECTS)}_{secrets.randbelow(90) + 10}"
        if name not in taken:
            taken.add(name)
            return name


def _bodies(must_pass: bool) -> str:
    a, b, c = (secrets.randbelow(900) + 100 for _ in range(3))
    want = sorted([a, b, c]) if must_pass else [c, a, b + 1]
    return f"values = [{a}, {b}, {c}]\n    assert sorted(values) == {want}"


def _graded_class(task: Task, file: str) -> str | None:
    for test_id in task.FAIL_TO_PASS + task.PASS_TO_PASS:
        parts = test_id.split("::")
        if parts[0] == file and len(parts) == 3:
            return parts[1]
    return None


def plan(task: Task, sources: dict[str, str]) -> CanaryPlan:
    """Canaries for the hidden test files whose text is in `sources` (file -> text)."""
    graded = {t.split("::")[0] for t in task.FAIL_TO_PASS + task.PASS_TO_PASS}
    out = CanaryPlan()
    for file, text in sorted(sources.items()):
        if graded and file not in graded:
            continue
        cls = _graded_class(task, file)
        if cls is None and (task.test.runner == "unittest" or not graded):
            found = _TESTCASE.findall(text)
            cls = found[0] if found else None
        if cls is None and task.test.runner == "unittest":
            continue
        existing = _TEST_DEF.findall(text)
        taken = set(existing)
        code = []
        for must_pass in (False, True):
            canary = Canary(file, _name(existing, taken), must_pass, cls)
            out.canaries.append(canary)
            if cls:
                code.append(f"\n\ndef {canary.name}(self):\n    {_bodies(must_pass)}\n\n\n"
                            f"{cls}.{canary.name} = {canary.name}\ndel {canary.name}\n")
            else:
                code.append(f"\n\ndef {canary.name}():\n    {_bodies(must_pass)}\n")
        out.texts[file] = "".join(code)
    return out


def check(canaries: list[Canary], outcomes: dict[str, Outcome]) -> tuple[dict[str, Outcome], list[str]]:
    """The outcomes without the canaries, and what the canaries say was forged (empty when nothing was)."""
    found: dict[Canary, Outcome] = {}
    rest = {}
    for test_id, outcome in outcomes.items():
        hit = next((c for c in canaries if c.matches(test_id)), None)
        if hit:
            found[hit] = outcome
        else:
            rest[test_id] = outcome
    problems = []
    for c in canaries:
        outcome = found.get(c)
        if outcome is None:
            file_ran = any("::" in t and t.split("::")[0].endswith(c.file.rsplit("/", 1)[-1]) for t in rest)
            if file_ran:
                problems.append("a canary test is missing from the outcomes")
        elif not c.must_pass and outcome == "passed":
            problems.append("a must-fail canary test passed")
    return rest, sorted(set(problems))
