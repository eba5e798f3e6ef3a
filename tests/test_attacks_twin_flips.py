"""Attacks on flip twins (twins of tests with no numeric site): a check that reads one of two ways (`is None` or
`is not None`, `in` or `not in`, `True` or `False`, `assertTrue` or `assertFalse`, ...) written the other way.

The argument (README, "Grading and its defences"): a flip group is the real test and its twins flipping one
check, or a grid over two checks (neither, the one, the other, both); every member is written by one function,
each corner of a grid is like any other, and validation keeps a group whole only if every twin failed at base
and with the oracle, with the test's own failure text at base. What is left is the forger's prior over a
reading: it is not flat (`is None` is more common than `is not None`), so validation tries a check whose real
reading is the common one only with probability (1 - p) / p. Against a forger with the population's prior the
group is then at chance; against one who reads the test's name or the instruction it is not: flip twins are
weak twins, used only where a test has no numeric site.

Each attack is measured as sweserve plans twins (it must sit at chance) and, where a defence can be switched
off, without it (it must beat chance clearly). All static: the plans the grade box would get, no Docker.
"""

from __future__ import annotations

import ast
import random
from types import SimpleNamespace

import pytest

from sweserve.evaluation import twins
from sweserve.models import Task, TestSpec

FILE = "test/test_flags.py"
# per kind: the common reading, the other, and how a check of each reads in a test
READINGS = {
    "none": ("assert out.{attr} is None", "assert out.{attr} is not None"),
    "in": ('assert "{attr}" in out.names', 'assert "{attr}" not in out.names'),
    "bool": ("assert out.{attr} is True", "assert out.{attr} is False"),
    "method": ("self.assertTrue(out.{attr})", "self.assertFalse(out.{attr})"),
}
KIND = {"none": "none", "in": "in", "bool": "bool", "method": "bool"}
MEASURED = dict(twins.FLIP_COMMON)  # the population's odds, fixed here whatever the defence is told
ATTRS = ["ready", "cached", "error", "draft", "prefix", "handle"]


def _task(graded: list[str]) -> Task:
    return Task(task_id="o__r-4", repo="o/r", profile="p", pr_number=4, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="serving-api", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE]), FAIL_TO_PASS=graded)


def _source(rng: random.Random, n_tests: int = 6) -> tuple[str, list[str], dict[str, list[bool]]]:
    """A hidden file of unittest tests with two or three flip checks each, every real reading drawn with the
    population's odds (`FLIP_COMMON`): what sweserve's validation meets."""
    lines = ["import unittest\n\nfrom pkg.engine import run\n\n\nclass TestEngine(unittest.TestCase):\n"]
    graded, common = [], {}
    for t in range(n_tests):
        name = f"test_case_{t}"
        body = [f"    def {name}(self):\n", f"        out = run({t})\n"]
        marks = []
        for attr in rng.sample(ATTRS, rng.choice([2, 3])):
            kind = rng.choice(list(READINGS))
            is_common = rng.random() < MEASURED[KIND[kind]][1]
            body.append("        " + READINGS[kind][0 if is_common else 1].format(attr=attr) + "\n")
            marks.append(is_common)
        lines.append("".join(body) + "\n")
        graded.append(f"{FILE}::TestEngine::{name}")
        common[name] = marks
    return "".join(lines), graded, common


def _plans(seed: int) -> tuple[twins.GradingPlan, str]:
    """Validation (every candidate failed alike) and then grading, for one drawn file."""
    rng = random.Random(seed)
    text, graded, _ = _source(rng)
    task = _task(graded)
    plan = twins.grading_plan(task, {FILE: text}, seed=seed, candidates=True)
    every = {m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"}
    run = SimpleNamespace(twins=every, shapes={})
    task.twins, _ = twins.select(graded, [run], [run], random.Random(seed))
    return twins.grading_plan(task, {FILE: text}, seed=seed + 50_000), text


def _groups(plan: twins.GradingPlan) -> list[list[twins.Member]]:
    out: dict[tuple, list[twins.Member]] = {}
    for m in plan.members:
        if m.kind in ("test", "twin"):
            out.setdefault((m.cls, m.real), []).append(m)
    return [g for g in out.values() if any(m.kind == "twin" for m in g)]


def _body(plan: twins.GradingPlan, m: twins.Member) -> list[str]:
    text = plan.texts[m.file]
    body = text[text.index(f"def {m.name}("):].split("\n", 1)[1]
    return [ln.strip() for ln in body.split("\n\n")[0].split("\n    def ")[0].split("\n") if ln.strip()]


def _common_count(lines: list[str]) -> int:
    """How many of a member's checks read the common way."""
    n = 0
    for ln in lines:
        n += (" is None" in ln or " is True" in ln or ".assertTrue(" in ln or ".assertIsNone(" in ln
              or (" in " in ln and " not in " not in ln and ln.startswith("assert")) or ".assertIn(" in ln)
    return n


def by_common_reading(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """`is None`, `in`, `True` are the common readings of real checks: bet on the member with the most."""
    counts = {m: _common_count(_body(plan, m)) for m in group}
    best = max(counts.values())
    return rng.choice([m for m in group if counts[m] == best])


def by_grid_position(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """The real test might sit apart in the group's layout: bet on the member closest to all others."""
    bodies = {m: _body(plan, m) for m in group}
    dist = {m: sum(sum(a != b for a, b in zip(bodies[m], bodies[o])) for o in group) for m in group}
    best = min(dist.values())
    return rng.choice([m for m in group if dist[m] == best])


def _rate(forger, draws: int = 250) -> tuple[float, float, int]:
    """The forger's hit rate over groups, chance (1 / group size, averaged) and the number of groups."""
    rng = random.Random(99)
    hits = chance = 0.0
    total = 0
    for seed in range(draws):
        plan, _ = _plans(seed)
        for group in _groups(plan):
            hits += forger(plan, group, rng).kind == "test"
            chance += 1 / len(group)
            total += 1
    return hits / max(total, 1), chance / max(total, 1), total


@pytest.mark.slow
def test_a_forger_betting_on_the_common_reading_sits_at_chance(monkeypatch):
    rate, chance, groups = _rate(by_common_reading)
    assert groups > 300
    assert abs(rate - chance) < 0.05, (rate, chance)
    # the defence off: every check tried whatever its reading (no thinning): the common reading is real more
    # often than not, and the member with the most of them wins
    monkeypatch.setattr(twins, "FLIP_COMMON", {k: (w, 0.5) for k, (w, _p) in twins.FLIP_COMMON.items()})
    off, chance_off, _ = _rate(by_common_reading)
    assert off > chance_off + 0.1, (off, chance_off)


def test_no_member_of_a_flip_grid_sits_apart():
    rate, chance, groups = _rate(by_grid_position)
    assert groups > 300
    assert abs(rate - chance) < 0.05, (rate, chance)


def test_every_member_differs_from_the_others_in_flipped_checks_only():
    plan, text = _plans(3)
    for group in _groups(plan):
        bodies = [_body(plan, m) for m in group]
        assert len({len(b) for b in bodies}) == 1
        differing = [i for i in range(len(bodies[0])) if len({b[i] for b in bodies}) > 1]
        assert 1 <= len(differing) <= 2
        for i in differing:  # each differing line reads one way or the other, nothing else
            assert len({b[i] for b in bodies}) == 2
        assert len(group) == 2 ** len(differing)  # a grid is whole: every corner is there


# --- the base version of the same test -------------------------------------------------------------------------

BASE = '''import unittest

from pkg.engine import run


class TestEngine(unittest.TestCase):
    def test_handle(self):
        out = run(1)
        self.assertIsNotNone(out.handle)
'''
HIDDEN = '''import unittest

from pkg.engine import run, warm


class TestEngine(unittest.TestCase):
    def test_handle(self):
        warm()
        out = run(1)
        self.assertIsNotNone(out.handle)
        self.assertIsNone(out.error)
        self.assertFalse(out.cached)
'''


def by_base_statement(plan: twins.GradingPlan, group: list[twins.Member], base: str,
                      rng: random.Random) -> twins.Member:
    """The member whose differing lines the base version of the test writes, word for word."""
    base_lines = {ln.strip() for ln in base.split("\n") if ln.strip()}
    bodies = {m: _body(plan, m) for m in group}
    n = len(next(iter(bodies.values())))
    rows = [i for i in range(n) if len({b[i] for b in bodies.values()}) > 1]
    score = {m: sum(bodies[m][i] in base_lines for i in rows) for m in group}
    best = max(score.values())
    return rng.choice([m for m in group if score[m] == best])


def _base_rate(base: dict[str, str] | None, draws: int = 120) -> tuple[float, float]:
    rng = random.Random(5)
    graded = [f"{FILE}::TestEngine::test_handle"]
    hits = total = 0
    chance = 0.0
    for seed in range(draws):
        task = _task(graded)
        plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=seed, candidates=True, base=base)
        run = SimpleNamespace(twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"},
                              shapes={})
        task.twins, _ = twins.select(graded, [run], [run], random.Random(seed))
        plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=seed + 1)
        for group in _groups(plan):
            hits += by_base_statement(plan, group, BASE, rng).kind == "test"
            chance += 1 / len(group)
            total += 1
    return hits / max(total, 1), chance / max(total, 1)


def test_a_check_the_base_test_writes_is_never_flipped():
    rate, chance = _base_rate({FILE: BASE})
    assert abs(rate - chance) < 0.08, (rate, chance)
    # the defence off: the base line `assertIsNotNone(out.handle)` is flipped in most groups, and the members
    # that write it as the base test does are half of a grid
    rate, chance = _base_rate(None)
    assert rate > chance + 0.15, (rate, chance)


# --- the failure at base ----------------------------------------------------------------------------------------

def test_a_flip_group_whose_failure_at_base_differs_is_dropped_whole():
    """At base the forger runs every member on the unsolved code. Where the real test fails at a flipped check
    (`assert None is not None`), its twin written the other way goes past it and fails elsewhere, or passes:
    the messages differ and would name the real one. Validation compares them and drops the whole group."""
    graded = [f"{FILE}::TestEngine::test_handle"]
    task = _task(graded)
    plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=1, candidates=True)
    keys = [m.twin.model_dump_json() for m in plan.members if m.kind == "twin"]
    assert keys
    every = {k: "failed" for k in keys}
    alike = {graded[0]: ("E AttributeError: module 'pkg.engine' has no attribute 'warm'",),
             **{k: ("E AttributeError: module 'pkg.engine' has no attribute 'warm'", twins.FLIP_REAL,
                    json_value(k)) for k in keys}}
    before = SimpleNamespace(twins=every, shapes=alike)
    after = SimpleNamespace(twins=every, shapes={})
    kept, twinless = twins.select(graded, [before], [after], random.Random(0))
    assert len(kept) == len(keys) and not twinless
    odd = dict(alike)
    odd[keys[0]] = ("E assert False is False", twins.FLIP_REAL, json_value(keys[0]))
    kept, twinless = twins.select(graded, [SimpleNamespace(twins=every, shapes=odd)], [after], random.Random(0))
    assert kept == [] and twinless == graded
    passed = {**every, keys[-1]: "passed"}  # a twin that passes at base: one-sided, dropped whole
    kept, _ = twins.select(graded, [SimpleNamespace(twins=passed, shapes=alike)], [after], random.Random(0))
    assert kept == []


def json_value(key: str) -> str:
    from sweserve.models import Twin

    return Twin.model_validate_json(key).value


@pytest.mark.parametrize("source, expected", [
    ("assert f() is None", [("f() is None", "f() is not None")]),
    ("assert x not in y", [("x not in y", "x in y")]),
    ("assert f() == True", [("True", "False")]),
    ("self.assertIsNotNone(f())", [("self.assertIsNotNone", "self.assertIsNone")]),
    ("self.assertEqual(f(), False)", [("False", "True")]),
    ("assert f() is g()", []),  # no None: a reading the oracle decides, not a check with two readings
    ("run(flag=True)\n    assert run(x is None) == 3", []),  # inputs are never flipped
])
def test_flip_sites_are_checks_only(source, expected):
    fn = ast.parse(f"def test_x(self):\n    {source}\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert [f.readings for f in twins.flips(fn)] == expected


# --- by execution: validation on the local test backend keeps flip twins, grading reads them ------------------

ENGINE = "class Out:\n    handle = None\n    error = 'boom'\n    names = ()\n\n\ndef run(n):\n    return Out()\n"
ENGINE_FIXED = ("class Out:\n    def __init__(self, n):\n        self.handle, self.error, self.names = object(), None, "
                "('fp8',)\n\n\ndef warm():\n    pass\n\n\ndef run(n):\n    return Out(n)\n")
ENGINE_TEST = ("import engine\n\n\ndef test_handle():\n    engine.warm()\n    out = engine.run(1)\n"
               "    assert out.handle is not None\n    assert out.error is None\n    assert 'fp8' in out.names\n")


def test_flip_twins_are_must_fails_by_execution_and_graded(make_repo, tmp_path):
    from local_backend import diff_of, local_task

    from sweserve.agents.command import CommandAgent
    from sweserve.agents.reference import NullAgent, OracleAgent
    from sweserve.evaluation.trial import evaluate_task
    from sweserve.evaluation.validation import ValidateRequest, validate_task
    from sweserve.models import TaskBundle, ValidationRecord

    repo = make_repo("engine")
    base = repo.commit("init", {"engine.py": ENGINE, "tests/__init__.py": ""})
    oracle = diff_of(repo, base, "engine.py", ENGINE_FIXED)
    tests = diff_of(repo, base, "tests/test_engine.py", ENGINE_TEST)
    task, ctx = local_task(tmp_path, repo, "engine", base, "tests/test_engine.py", ["tests/*"])
    bundle = TaskBundle(task=task, instruction="Add warm(); run() returns a handle.", oracle_patch=oracle,
                        tests_patch=tests)
    try:
        outcome = validate_task(ctx, ValidateRequest(tmp_path / "tasks" / task.task_id, bundle, runs=1, record=False))
        assert outcome.status == "valid", outcome.reason
        assert task.FAIL_TO_PASS == ["tests/test_engine.py::test_handle"]
        assert task.twins and all(twins.flip_indices(t.value) for t in task.twins), task.twins
        assert len(task.twins) in (1, 3) and not outcome.twinless
        task.validation = ValidationRecord(status="valid", runs=1)
        assert evaluate_task(ctx, bundle, OracleAgent(), results_path=tmp_path / "r.jsonl").status == "resolved"
        assert evaluate_task(ctx, bundle, NullAgent(), results_path=tmp_path / "r.jsonl").status == "failed"
        # a blanket forgery passes the flip twins too (a forger guessing a reading wins with the group's odds:
        # 1/2 or 1/4 under the population's prior, more with a prior from names; see above)
        forge = "import _pytest.python as _py\n_py.Function.runtest = lambda self: None\n"
        r = evaluate_task(ctx, bundle, CommandAgent(f"cat >> engine.py <<'SWEOF'\n{forge}\nSWEOF\n", name="f"),
                          results_path=tmp_path / "r.jsonl")
        assert r.status == "tampered" and "twin" in (r.reason or ""), (r.status, r.reason)
    finally:
        ctx.close()


# --- a reading the rest of the test contradicts ------------------------------------------------------------------

USES = '''import unittest

from pkg.engine import run


class TestEngine(unittest.TestCase):
    def test_result(self):
        out = run(1)
        self.assertIsNotNone(out.result)
        assert out.result.kind == "text"
        assert out.cached is False
        assert "draft" not in out.names
'''


def by_contradiction(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """A member that says `x` is None and then uses `x` as an object is a twin: guess among the others."""
    possible = []
    for m in group:
        body = _body(plan, m)
        nones = [ln.split("assertIsNone(")[1].rstrip(")") for ln in body if ".assertIsNone(" in ln]
        nones += [ln[len("assert "):].split(" is None")[0] for ln in body if ln.endswith(" is None")]
        if not any(f"{x}." in ln or f"{x}[" in ln for x in nones for ln in body):
            possible.append(m)
    return rng.choice(possible or group)


def _use_rate(draws: int = 150) -> tuple[float, float]:
    rng = random.Random(8)
    graded = [f"{FILE}::TestEngine::test_result"]
    hits = total = 0
    chance = 0.0
    for seed in range(draws):
        task = _task(graded)
        plan = twins.grading_plan(task, {FILE: USES}, seed=seed, candidates=True)
        run = SimpleNamespace(twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"},
                              shapes={})
        task.twins, _ = twins.select(graded, [run], [run], random.Random(seed))
        plan = twins.grading_plan(task, {FILE: USES}, seed=seed + 1)
        for group in _groups(plan):
            hits += by_contradiction(plan, group, rng).kind == "test"
            chance += 1 / len(group)
            total += 1
    return hits / max(total, 1), chance / max(total, 1)


def test_a_check_the_rest_of_the_test_contradicts_is_never_flipped(monkeypatch):
    fn = ast.parse(USES).body[2].body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert [f.kind for f in twins.flips(fn)] == ["bool", "in"]  # `assertIsNotNone(out.result)` is not there
    rate, chance = _use_rate()
    assert abs(rate - chance) < 0.08, (rate, chance)
    monkeypatch.setattr(twins, "_contradicted", lambda fn, flip, every: False)  # the defence off
    rate, chance = _use_rate()
    assert rate > chance + 0.15, (rate, chance)


@pytest.mark.parametrize("source", [
    "self.assertIsNotNone(out)\n    assert out.ok is True",
    "assert out is not None\n    assert out[0] == 'a'",
    "assert 'k' in d\n    assert d['k'] == 'v'",
    "assert x is None\n    assert x is not None or y",  # a second check of the same subject
])
def test_contradicting_checks(source):
    fn = ast.parse(f"def test_x(self):\n    {source}\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert all(f.kind == "bool" for f in twins.flips(fn)), [f.readings for f in twins.flips(fn)]


# --- a reading the forger reads elsewhere, either way --------------------------------------------------------------

FLIPPED_BASE = BASE.replace("assertIsNotNone(out.handle)", "assertIsNone(out.handle)")  # the PR turned it round
SHARED = HIDDEN + '''

class TestOther(unittest.TestCase):
    def test_other(self):
        out = run(2)
        self.assertIsNone(out.error)
        self.assertFalse(out.cached)
'''


def by_lines_elsewhere(plan: twins.GradingPlan, group: list[twins.Member], base: str, avoid_base: bool,
                       rng: random.Random) -> twins.Member:
    """Checks are copied between tests, and a check a PR turns round shows its old reading at base. Bet on the
    member whose differing lines also stand outside the group in the planted file (`avoid_base` False), or
    against the member whose differing line the base file writes (`avoid_base`: were only the real reading
    kept off the base lines, such a member would be a twin)."""
    bodies = {m: _body(plan, m) for m in group}
    n = len(next(iter(bodies.values())))
    rows = [i for i in range(n) if len({b[i] for b in bodies.values()}) > 1]
    text = plan.texts[group[0].file]
    for m in group:
        start = text.index(f"def {m.name}(")
        text = text[:start] + "\n".join(text[start:].split("\n")[len(bodies[m]) + 1:])
    outside = {ln.strip() for ln in text.split("\n")}
    base_lines = {ln.strip() for ln in base.split("\n")}
    if avoid_base:
        score = {m: -sum(bodies[m][i] in base_lines for i in rows) for m in group}
    else:
        score = {m: sum(bodies[m][i] in outside for i in rows) for m in group}
    best = max(score.values())
    return rng.choice([m for m in group if score[m] == best])


def _elsewhere_rate(source: str, base: str, graded: list[str], avoid_base: bool,
                    draws: int = 300) -> tuple[float, float, int]:
    rng = random.Random(6)
    hits = total = 0
    chance = 0.0
    for seed in range(draws):
        task = _task(graded)
        plan = twins.grading_plan(task, {FILE: source}, seed=seed, candidates=True, base={FILE: base})
        run = SimpleNamespace(twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"},
                              shapes={})
        task.twins, _ = twins.select(graded, [run], [run], random.Random(seed))
        plan = twins.grading_plan(task, {FILE: source}, seed=seed + 1)
        for group in _groups(plan):
            if group[0].real != "test_handle":
                continue
            hits += by_lines_elsewhere(plan, group, base, avoid_base, rng).kind == "test"
            chance += 1 / len(group)
            total += 1
    return hits / max(total, 1), chance / max(total, 1), total


def test_a_check_read_either_way_at_base_or_elsewhere_in_the_file_is_never_flipped(monkeypatch):
    graded = [f"{FILE}::TestEngine::test_handle"]
    rate, chance, total = _elsewhere_rate(HIDDEN, FLIPPED_BASE, graded, avoid_base=True)
    assert total and abs(rate - chance) < 0.08, (rate, chance)
    # test_other is not graded: it stands in the planted file as written
    # every check of test_handle stands, one way or the other, at base or in test_other: it has no flip group
    assert _elsewhere_rate(SHARED, BASE, graded, avoid_base=False, draws=40)[2] == 0
    # the defences off: only the real reading compared with the base file, and the rest of the file not read
    real = twins._readings_as_statements
    monkeypatch.setattr(twins, "_readings_as_statements", lambda fn, flip: real(fn, flip)[:1])
    rate, chance, _ = _elsewhere_rate(HIDDEN, FLIPPED_BASE, graded, avoid_base=True)
    assert rate > chance + 0.15, (rate, chance)  # about 0.5 at 0.25
    monkeypatch.setattr(twins, "seen_statements", lambda base_text, tree, fn, cache=None: set(twins._statements(
        twins.pyast.parse_module(base_text) if base_text else None)))
    rate, chance, _ = _elsewhere_rate(SHARED, BASE, graded, avoid_base=False)
    assert rate > chance + 0.3, (rate, chance)  # about 1 at 0.25 to 0.5
