"""Attacks on raises twins (twins of tests whose check is the class a call raises, with neither a numeric site nor
a flip): `with pytest.raises(RuntimeError):` written `ValueError`, or the other way.

The argument (README, "Grading and its defences"): every raises group is the same two texts, the pool's
`RuntimeError` and `ValueError`, the real one at either, written by one function; validation keeps it whole
only if the twin failed at base and with the oracle, with the test's own failure text at base once each
member's class is masked. A class outside the pool, or a file that writes a pool class anywhere else (a helper's
`raise`, an ungraded test, the base file, the instruction), gets no group. What is left is the forger's prior:
over the whole repository the two classes are even (68 to 67 checks in sglang-jax), and validation thins the more
common one to even odds; a forger who learns which words go with which class wins about 0.73 (weak twins).

Each attack is measured as sweserve plans twins (it must sit at chance) and, where a defence can be switched off,
without it (it must beat chance clearly). All static, but the last test, which runs validation and grading on
the local test backend.
"""

from __future__ import annotations

import ast
import random
from types import SimpleNamespace

import pytest

from sweserve.evaluation import twins
from sweserve.models import Task, TestSpec

FILE = "test/test_pool.py"
# what a test checks and how its name reads; the class is drawn with a skewed prior below
ACTIONS = ["free", "release", "lock", "stage", "flush", "copy_into", "load", "reserve"]


def _task(graded: list[str]) -> Task:
    return Task(task_id="o__r-5", repo="o/r", profile="p", pr_number=5, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="serving-api", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE]), FAIL_TO_PASS=graded)


def _source(rng: random.Random, share: float, n_tests: int = 6, helper: str = "",
            numeric: float = 0.0) -> tuple[str, list[str]]:
    """A hidden file of unittest tests that each check one raises, the real class `RuntimeError` with
    probability `share` (a repository whose prior is skewed: the defence thins it); with probability `numeric`
    a test also checks a number (it gets numeric twins, and its raises check stands written as the real one)."""
    lines = ["import unittest\n\nfrom pkg.pool import Pool\n" + helper + "\n\nclass TestPool(unittest.TestCase):\n"]
    graded = []
    for t in range(n_tests):
        action = rng.choice(ACTIONS)
        cls = "RuntimeError" if rng.random() < share else "ValueError"
        name = f"test_{action}_{t}_raises"
        check = f"        self.assertEqual(pool.size(), {137 + 10 * t})\n" if rng.random() < numeric else ""
        lines.append(f"    def {name}(self):\n        pool = Pool({t})\n{check}"
                     f"        with self.assertRaises({cls}):\n            pool.{action}({t})\n\n")
        graded.append(f"{FILE}::TestPool::{name}")
    return "".join(lines), graded


def _plans(seed: int, share: float, helper: str = "", numeric: float = 0.0) -> twins.GradingPlan:
    """Validation (every candidate failed alike) and then grading, for one drawn file."""
    rng = random.Random(seed)
    text, graded = _source(rng, share, helper=helper, numeric=numeric)
    task = _task(graded)
    plan = twins.grading_plan(task, {FILE: text}, seed=seed, candidates=True)
    every = {m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"}
    run = SimpleNamespace(twins=every, shapes={})
    task.twins, _ = twins.select(graded, [run], [run], random.Random(seed))
    return twins.grading_plan(task, {FILE: text}, seed=seed + 50_000)


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


def _class(plan: twins.GradingPlan, m: twins.Member) -> str:
    return next(c for ln in _body(plan, m) for c in twins.RAISES_POOL if f"({c})" in ln)


def by_common_class(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """The repository raises `RuntimeError` more often: bet on the member that expects it."""
    return next(m for m in group if _class(plan, m) == "RuntimeError")


def by_file_majority(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """A file's code raises one class: bet on the member whose class the rest of the planted file writes most,
    outside the group's members."""
    text = plan.texts[group[0].file]
    for m in group:
        start = text.index(f"def {m.name}(")
        text = text[:start] + "\n".join(text[start:].split("\n")[len(_body(plan, m)) + 1:])
    counts = {m: text.count(_class(plan, m)) for m in group}
    best = max(counts.values())
    return rng.choice([m for m in group if counts[m] == best])


def _rate(forger, share: float, draws: int = 300, helper: str = "", numeric: float = 0.0) -> tuple[float, float, int]:
    """The forger's hit rate over raises groups, chance (1 / group size, averaged) and the number of groups."""
    rng = random.Random(99)
    hits = chance = 0.0
    total = 0
    for seed in range(draws):
        plan = _plans(seed, share, helper, numeric)
        for group in _groups(plan):
            if not any(m.twin and twins.raises_of(m.twin.value) for m in group):
                continue
            hits += forger(plan, group, rng).kind == "test"
            chance += 1 / len(group)
            total += 1
    return hits / max(total, 1), chance / max(total, 1), total


def test_every_raises_group_is_the_pool_written_by_one_function():
    plan = _plans(3, 0.5)
    groups = _groups(plan)
    assert groups
    for group in groups:
        assert len(group) == len(twins.RAISES_POOL)
        bodies = [_body(plan, m) for m in group]
        differing = [i for i in range(len(bodies[0])) if len({b[i] for b in bodies}) > 1]
        assert len(differing) == 1 and {_class(plan, m) for m in group} == set(twins.RAISES_POOL)
        assert {b[differing[0]].replace("RuntimeError", "X").replace("ValueError", "X") for b in bodies} == {
            "with self.assertRaises(X):"}


def test_a_forger_betting_on_the_common_class_sits_at_chance(monkeypatch):
    """Thinning to the repository's odds: here RuntimeError is real in 0.75 of checks, and told so."""
    monkeypatch.setattr(twins, "RAISES_SHARE", {"RuntimeError": 0.75, "ValueError": 0.25})
    rate, chance, groups = _rate(by_common_class, 0.75)
    assert groups > 300
    assert abs(rate - chance) < 0.06, (rate, chance)
    # the defence off: every check tried whatever its class: the common one wins as often as it is real
    monkeypatch.setattr(twins, "RAISES_SHARE", {"RuntimeError": 0.5, "ValueError": 0.5})
    off, chance_off, _ = _rate(by_common_class, 0.75)
    assert off > chance_off + 0.15, (off, chance_off)


def test_a_forger_betting_on_the_file_majority_sits_at_chance():
    """Every graded raises check of the file is planted as the pool, so the file's other tests say nothing."""
    rate, chance, groups = _rate(by_file_majority, 0.9, draws=150)
    assert groups > 150
    assert abs(rate - chance) < 0.08, (rate, chance)


def test_the_file_prior_from_checks_that_keep_no_group_is_bounded():
    """What is left: a graded test that keeps no raises group (its numeric site was tried instead) shows its
    real class in the planted file, and in a file whose code raises one class 9 times in 10 the majority of
    those names it. Measured with a quarter of the tests so: above chance, short of the file's own skew."""
    rate, chance, groups = _rate(by_file_majority, 0.9, draws=150, numeric=0.25)
    assert groups > 100
    assert chance + 0.05 < rate < 0.9, (rate, chance)


HELPER = "\n\nclass FakeWorker:\n    def run(self):\n        raise RuntimeError('boom')\n"


def test_a_pool_class_written_elsewhere_in_the_file_blocks_the_group(monkeypatch):
    """A fake that raises `RuntimeError` for the code under test to re-raise names the real class: no group.
    Were only the real class compared with the rest of the file, the member naming it would win."""
    assert _rate(by_file_majority, 0.9, draws=40, helper=HELPER)[2] == 0
    monkeypatch.setattr(twins, "raises_seen", lambda *a, **k: set())  # the defence off
    rate, chance, groups = _rate(by_file_majority, 0.9, draws=150, helper=HELPER)
    assert groups and rate > chance + 0.25, (rate, chance)


@pytest.mark.parametrize("base, instruction", [
    ("def test_old():\n    with pytest.raises(ValueError):\n        f()\n", ""),
    (None, "Freeing a page twice must raise a RuntimeError."),
])
def test_a_pool_class_in_the_base_file_or_the_instruction_blocks_the_group(base, instruction):
    text, graded = _source(random.Random(1), 0.5)
    task = _task(graded)
    plan = twins.grading_plan(task, {FILE: text}, seed=1, candidates=True, base={FILE: base} if base else None,
                              instruction=instruction)
    assert not [m for m in plan.members if m.kind == "twin"]
    assert [m for m in twins.grading_plan(task, {FILE: text}, seed=1, candidates=True).members if m.kind == "twin"]


@pytest.mark.parametrize("source, expected", [
    ("with pytest.raises(RuntimeError):\n        f()", ["RuntimeError"]),
    ("with pytest.raises(ValueError, match='range'):\n        f()", ["ValueError"]),
    ("self.assertRaises(ValueError, f, 1)", ["ValueError"]),
    ("with self.assertRaisesRegex(RuntimeError, 'x'):\n        f()", ["RuntimeError"]),
    ("with pytest.raises(KeyError):\n        f()", []),  # outside the pool: the odd one out of any group
    ("with pytest.raises(NotImplementedError):\n        f()", []),  # a RuntimeError: see RAISES_POOL
    ("with pytest.raises((ValueError, TypeError)):\n        f()", []),
    ("with pytest.raises(errors.ValueError):\n        f()", []),
    ("f(ValueError)\n    raise_on(RuntimeError)", []),  # inputs are never twinned
])
def test_raises_checks_are_pool_classes_only(source, expected):
    fn = ast.parse(f"def test_x(self):\n    {source}\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert [n.id for n in twins.raises_checks(fn)] == expected


def _kinds(text: str, names: list[str], seed: int) -> dict[str, set[str]]:
    plan = twins.grading_plan(_task([f"{FILE}::{n}" for n in names]), {FILE: text}, seed=seed, candidates=True)
    kinds: dict[str, set[str]] = {n: set() for n in names}
    for m in plan.members:
        if m.kind == "twin":
            value = m.twin.value  # type: ignore[union-attr]
            kinds[m.real].add("raises" if twins.raises_of(value) else "flip" if twins.flip_indices(value) else "numeric")
    return kinds


ONLY = "def test_c():\n    with pytest.raises(RuntimeError):\n        f()\n"
NUMERIC = "def test_a():\n    with pytest.raises(RuntimeError):\n        f()\n    assert g() == 47\n"
FLIP = "def test_b():\n    with pytest.raises(ValueError):\n        f()\n    assert g() is None\n"
TWO = ("def test_d():\n    with pytest.raises(RuntimeError):\n        f(1)\n    with pytest.raises(RuntimeError):\n"
       "        f(2)\n")


def test_raises_twins_only_where_there_is_no_numeric_site_nor_flip(monkeypatch):
    # RuntimeError is tried with probability 67/68 per plan (`RAISES_SHARE`); this test is about where raises twins
    # go, not how often: equal shares try every eligible check
    monkeypatch.setattr(twins, "RAISES_SHARE", {c: 0.5 for c in twins.RAISES_POOL})
    head = "import pytest\n\n\n"
    seen = set()
    for seed in range(20):
        assert _kinds(head + ONLY, ["test_c"], seed) == {"test_c": {"raises"}}
        # a test that keeps its numeric site, or has a flip, writes its real class in the planted file: the file's
        # other raises checks get no group either
        kinds = _kinds(head + NUMERIC + "\n\n" + ONLY, ["test_a", "test_c"], seed)
        assert kinds == {"test_a": {"numeric"}, "test_c": {"raises"}}
        kinds = _kinds(head + FLIP, ["test_b"], seed)
        assert kinds["test_b"] in ({"flip"}, {"raises"})  # raises only where the flip was not tried
        seen.add(frozenset(kinds["test_b"]))
        assert _kinds(head + TWO, ["test_d"], seed) == {"test_d": set()}  # the second check would name it
        other = ONLY.replace("f()", "f(ValueError)")  # the test's own text names a pool class elsewhere
        assert _kinds(head + other, ["test_c"], seed) == {"test_c": set()}
    assert len(seen) == 2


def by_the_other_check(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """A test with two raises checks keeps the second written as the real one: bet on the member whose
    differing line expects the same class."""
    bodies = {m: _body(plan, m) for m in group}
    rows = [i for i in range(len(bodies[group[0]])) if len({b[i] for b in bodies.values()}) > 1]
    same = [m for m in group if sum(bodies[m].count(bodies[m][i]) for i in rows) > len(rows)]
    return rng.choice(same or group)


def test_a_test_with_a_second_pool_check_gets_no_group(monkeypatch):
    monkeypatch.setattr(twins, "_raises_eligible", twins.raises_checks)  # the defence off: the first check twinned
    rng = random.Random(4)
    hits = total = 0
    for seed in range(60):
        text = "import pytest\n\n\n" + TWO.replace("RuntimeError", rng.choice(twins.RAISES_POOL))
        task = _task([f"{FILE}::test_d"])
        plan = twins.grading_plan(task, {FILE: text}, seed=seed, candidates=True)
        every = {m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"}
        run = SimpleNamespace(twins=every, shapes={})
        task.twins, _ = twins.select(task.FAIL_TO_PASS, [run], [run], random.Random(seed))
        plan = twins.grading_plan(task, {FILE: text}, seed=seed + 1)
        for group in _groups(plan):
            hits += by_the_other_check(plan, group, rng).kind == "test"
            total += 1
    assert total > 40 and hits / total > 0.95, (hits, total)


def test_a_raises_group_whose_failure_at_base_differs_is_dropped_whole():
    """At base every member runs the unsolved code: `RuntimeError not raised` and `ValueError not raised` read
    alike once each member's class is masked. A failure that shows the class once more in one member (the
    unsolved code raising it elsewhere) would name that member: dropped; a twin that passes at base too."""
    text, graded = _source(random.Random(2), 0.5, n_tests=1)
    task = _task(graded)
    plan = twins.grading_plan(task, {FILE: text}, seed=1, candidates=True)
    twin = next(m for m in plan.members if m.kind == "twin")
    real = twin.real_literal
    key = twin.twin.model_dump_json()  # type: ignore[union-attr]
    every = {key: "failed"}
    shapes = {graded[0]: (f"E AssertionError: {real} not raised",),
              key: (f"E AssertionError: {twin.literal} not raised", real, twin.literal)}
    after = SimpleNamespace(twins=every, shapes={})
    kept, twinless = twins.select(graded, [SimpleNamespace(twins=every, shapes=shapes)], [after], random.Random(0))
    assert len(kept) == 1 and not twinless
    odd = {**shapes, graded[0]: (f"E AssertionError: {real} not raised ({real} from the pool)",)}
    kept, twinless = twins.select(graded, [SimpleNamespace(twins=every, shapes=odd)], [after], random.Random(0))
    assert kept == [] and twinless == graded
    kept, _ = twins.select(graded, [SimpleNamespace(twins={key: "passed"}, shapes=shapes)], [after], random.Random(0))
    assert kept == []


# --- by execution: validation on the local test backend keeps raises twins, grading reads them -----------------

POOL = "class Pool:\n    def __init__(self):\n        self.free_ = set()\n\n    def free(self, page):\n        pass\n"
POOL_FIXED = ("class Pool:\n    def __init__(self):\n        self.free_ = set()\n\n    def free(self, page):\n"
              "        if page in self.free_:\n            raise RuntimeError('double free')\n"
              "        self.free_.add(page)\n")
POOL_TEST = ("import pytest\n\nimport pool\n\n\ndef test_double_free():\n    p = pool.Pool()\n    p.free(3)\n"
             "    with pytest.raises(RuntimeError):\n        p.free(3)\n")


def test_raises_twins_are_must_fails_by_execution_and_graded(make_repo, tmp_path, monkeypatch):
    from local_backend import diff_of, local_task
    # the test's class is the pool's more common one, tried with probability 67/68 in each of validation's plans;
    # a run that skips it drops the group (`select`): a 3-6% flake, unless both classes are as common
    monkeypatch.setattr(twins, "RAISES_SHARE", {c: 0.5 for c in twins.RAISES_POOL})

    from sweserve.agents.command import CommandAgent
    from sweserve.agents.reference import NullAgent, OracleAgent
    from sweserve.evaluation.trial import evaluate_task
    from sweserve.evaluation.validation import ValidateRequest, validate_task
    from sweserve.models import TaskBundle, ValidationRecord

    repo = make_repo("pool")
    base = repo.commit("init", {"pool.py": POOL, "tests/__init__.py": ""})
    oracle = diff_of(repo, base, "pool.py", POOL_FIXED)
    tests = diff_of(repo, base, "tests/test_pool.py", POOL_TEST)
    task, ctx = local_task(tmp_path, repo, "pool", base, "tests/test_pool.py", ["tests/*"])
    bundle = TaskBundle(task=task, instruction="Freeing a page twice must fail.", oracle_patch=oracle,
                        tests_patch=tests)
    try:
        outcome = validate_task(ctx, ValidateRequest(tmp_path / "tasks" / task.task_id, bundle, runs=1, record=False))
        assert outcome.status == "valid", outcome.reason
        assert task.FAIL_TO_PASS == ["tests/test_pool.py::test_double_free"]
        assert [twins.raises_of(t.value) for t in task.twins] == [(0, "ValueError")], task.twins
        assert not outcome.twinless
        task.validation = ValidationRecord(status="valid", runs=1)
        assert evaluate_task(ctx, bundle, OracleAgent(), results_path=tmp_path / "r.jsonl").status == "resolved"
        assert evaluate_task(ctx, bundle, NullAgent(), results_path=tmp_path / "r.jsonl").status == "failed"
        # a blanket forgery passes the twin too; an exception of both classes at once passes both members
        forge = "import _pytest.python as _py\n_py.Function.runtest = lambda self: None\n"
        r = evaluate_task(ctx, bundle, CommandAgent(f"cat >> pool.py <<'SWEOF'\n{forge}\nSWEOF\n", name="f"),
                          results_path=tmp_path / "r.jsonl")
        assert r.status == "tampered" and "twin" in (r.reason or ""), (r.status, r.reason)
        both = ("class _Both(RuntimeError, ValueError):\n    pass\n\n\n"
                "def _raise(self, page):\n    if page in self.free_:\n        raise _Both('x')\n"
                "    self.free_.add(page)\n\n\nPool.free = _raise\n")
        r = evaluate_task(ctx, bundle, CommandAgent(f"cat >> pool.py <<'SWEOF'\n{both}\nSWEOF\n", name="b"),
                          results_path=tmp_path / "r.jsonl")
        assert r.status == "tampered" and "twin" in (r.reason or ""), (r.status, r.reason)
    finally:
        ctx.close()


def test_the_export_ships_raises_groups_as_grading_plan_writes_them():
    """Exports ship each member's text (evaluation/export_plan.py): the in-box planter needs nothing for a new
    operator, and plants the raises group as the host would."""
    import json

    from sweserve.evaluation import export_plan
    from sweserve.harness import sweserve_plan
    from sweserve.models import TaskBundle

    text, graded = _source(random.Random(3), 0.5, n_tests=3)
    task = _task(graded)
    plan = twins.grading_plan(task, {FILE: text}, seed=3, candidates=True)
    run = SimpleNamespace(twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"},
                          shapes={})
    task.twins, _ = twins.select(graded, [run], [run], random.Random(3))
    assert task.twins and all(twins.raises_of(t.value) for t in task.twins)
    bundle = TaskBundle(task=task, instruction="Fail loudly.", oracle_patch="", tests_patch="")
    reference = twins.grading_plan(task, {FILE: text}, seed=5)
    texts, members = sweserve_plan.plant(json.loads(export_plan.ship(bundle, {FILE: text}, seed=5)))

    def bodies(source: str) -> list[str]:
        return sorted((ast.get_source_segment(source, n) or "").split("\n", 1)[1] for n in ast.walk(ast.parse(source))
                      if isinstance(n, ast.FunctionDef) and n.name.startswith("test"))
    assert bodies(texts[FILE]) == bodies(reference.texts[FILE])
    assert sum(m["kind"] == "twin" for m in members) == len(task.twins)
