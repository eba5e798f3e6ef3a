"""Attacks on the twins' values by a prior: a forger who has not solved the task, but reads what the grade
box and the candidate phase show (the base version of each test, the instruction, how values are written),
picks per group the member a prior favours. Chance is 1/(K+1) only when no prior separates the members.

Each attack is measured twice: with the defence off (monkeypatched back to the old progression or site
choice: the prior must then beat chance clearly) and as sweserve plans twins (it must sit at chance, or the
test has no twins at all and is `twinless`, guarded by must-fail canaries). All static: the plans the grade
box would get, no Docker.
"""

from __future__ import annotations

import ast
import random
import re
from decimal import Decimal
from types import SimpleNamespace

import pytest

from sweserve.evaluation import guard, twins
from sweserve.models import Task, TestSpec

CHANCE = 1 / (twins.K + 1)


# --- groups of values as grading shows them ------------------------------------------------------------------

def _group(value: int | float, rng: random.Random) -> tuple[str, list[str]]:
    """The real literal and the K twin literals a recorded group shows: the group validation planted and
    kept whole (`select`)."""
    return twins.values(value, rng, twins.K)


def _written_unit(literal: str) -> Decimal:
    number = ast.literal_eval(literal)
    return twins._unit(number)


def by_written_step(members: list[str], rng: random.Random) -> str:
    """The real literal is written by `render` from its own last digit: a member written coarser than the
    others (`10` among 7, 8, 12; `0.20` among 0.25, 0.23) would have had twins on its own coarser step, so it
    is a twin. Guess among the rest."""
    finest = min(_written_unit(m) for m in members)
    possible = [m for m in members if _written_unit(m) == finest] or members
    return rng.choice(possible)


def by_power_of_two(members: list[str], rng: random.Random) -> str:
    """Sizes in inference tests are powers of two: bet on the one member that is one."""
    marked = [m for m in members if twins._marked(ast.literal_eval(m))]
    return marked[0] if len(marked) == 1 else rng.choice(members)


def _real_values(rng: random.Random) -> int | float:
    """Values shaped like real checks' expected values: sizes (often powers of two), counts, token ids,
    probabilities and tolerances written to two or three places."""
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice([16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192])
    if kind == 1:
        return rng.randint(11, 5000)
    if kind == 2:
        return round(rng.uniform(0.1, 0.99), 2)
    return round(rng.uniform(1.1, 9.9), 3)


def _rate(forger, draws: int = 6000, seed: int = 7) -> float:
    rng = random.Random(seed)
    hits = total = 0
    for _ in range(draws):
        value = _real_values(rng)
        if twins._marked(value) and twins._candidate_sites([[ast.parse(repr(value), mode="eval").body]], fall_back=False) == []:
            continue  # such a site gets no twins: the test is twinless or twinned elsewhere
        real, others = _group(value, rng)
        members = [real, *others]
        rng.shuffle(members)
        hits += forger(members, rng) == real
        total += 1
    return hits / total


def _old_values(value, rng, k=twins.K, avoid=frozenset()):
    """The progression before this defence: every step, whatever its shape."""
    unit = twins._unit(value)
    rank = rng.randint(0, k)
    real = twins._decimal(value)
    is_float = isinstance(value, float)
    others = [twins.render(real + (i - rank) * unit, is_float, unit) for i in range(k + 1) if i != rank]
    return twins.render(real, is_float, unit), others


def _old_sites(fn_sites, avoid=frozenset(), fn=None, fall_back=True, near=None):
    safe = [i for i, g in enumerate(fn_sites) if twins._sign_safe(twins._number(g[0]))]
    other = [i for i in range(len(fn_sites)) if i not in safe]
    picked = [safe[j] for j in twins._spread(len(safe), twins.CANDIDATE_SITES)]
    return picked + [other[j] for j in twins._spread(len(other), twins.CANDIDATE_SITES - len(picked))]


def test_a_member_written_on_a_coarser_step_is_not_singled_out_as_a_twin(monkeypatch):
    assert abs(_rate(by_written_step) - CHANCE) < 0.03
    rng = random.Random(1)
    for value in [17, 123, 0.25, 4.125, 7, 0.07]:
        real, others = twins.values(value, rng, twins.CANDIDATES)
        assert len({_written_unit(m) for m in [real, *others]}) == 1, (value, real, others)
    monkeypatch.setattr(twins, "values", _old_values)  # the defence off
    assert _rate(by_written_step) > CHANCE + 0.025  # about 0.28: a third of groups show a coarser member


def test_a_power_of_two_is_neither_a_real_value_nor_a_twin(monkeypatch):
    assert abs(_rate(by_power_of_two) - CHANCE) < 0.03
    monkeypatch.setattr(twins, "values", _old_values)  # the defence off: powers of two in and around groups
    monkeypatch.setattr(twins, "_candidate_sites", _old_sites)
    assert _rate(by_power_of_two) > CHANCE + 0.15


# --- the base version of the same test ---------------------------------------------------------------------------

FILE = "test/test_pool.py"
BASE_FILE = '''from pkg.pool import Pool


def test_pool_allocates():
    pool = Pool(size=48)
    assert pool.free() == 48
    assert pool.alloc(5) == 5


class TestEvict:
    def test_evicts_oldest(self):
        pool = Pool(size=48)
        assert pool.evict(3) == 37
        assert pool.used() == 11
'''
HIDDEN = '''from pkg.pool import Pool


def test_pool_allocates():
    pool = Pool(size=48)
    assert pool.free() == 48
    assert pool.alloc(5) == 5
    assert pool.pages() == 13


class TestEvict:
    def test_evicts_oldest(self):
        pool = Pool(size=48)
        assert pool.evict(3) == 37
        assert pool.used() == 11
        assert pool.reserved() == 27  # no sum of three of its other numbers (`derived`)


def test_pool_is_new():
    assert Pool(size=7).blocks() == 343
'''
GRADED = [f"{FILE}::test_pool_allocates", f"{FILE}::TestEvict::test_evicts_oldest", f"{FILE}::test_pool_is_new"]
INSTRUCTION = "Pools of 48 slots must report 13 pages of four slots and the reserved count."


def _task(**kw) -> Task:
    return Task(task_id="o__r-2", repo="o/r", profile="p", pr_number=2, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="scheduling-memory", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE]), FAIL_TO_PASS=GRADED, **kw)


def _recorded(seed: int, **plan_kw) -> Task:
    """Validation's outcome where every candidate failed alike: `select` over the candidates plan."""
    task = _task()
    plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=seed, candidates=True, **plan_kw)
    every = {m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"}
    run = SimpleNamespace(twins=every, shapes={})
    kept, _ = twins.select(GRADED, [run], [run], random.Random(seed))
    task.twins = kept
    return task


def _differing_lines(plan: twins.GradingPlan, group: list[twins.Member]) -> dict[twins.Member, str]:
    bodies = {}
    for m in group:
        text = plan.texts[m.file]
        start = text.index(f"def {m.name}(")
        body = text[start:].split("\n", 1)[1]
        bodies[m] = body.split("\n\n")[0].split("\n    def ")[0].split("\n")
    out = {}
    for m, lines in bodies.items():
        for i, line in enumerate(lines):
            if len({tuple(b[i:i + 1]) for b in bodies.values()}) > 1:
                out[m] = line.strip()
                break
    return out


def by_base_line(plan: twins.GradingPlan, group: list[twins.Member], base: str, instruction: str,
                 rng: random.Random) -> twins.Member:
    """The member whose differing line is, word for word, a line of the base file; else the one whose
    differing literal the instruction writes; else a guess."""
    lines = _differing_lines(plan, group)
    base_lines = {ln.strip() for ln in base.split("\n")}
    hit = [m for m in group if lines.get(m) in base_lines]
    if len(hit) == 1:
        return hit[0]
    numbers = set(re.findall(r"\d+", instruction))
    hit = [m for m in group if (re.findall(r"\d+(?:\.\d+)?", lines.get(m, "").split("==")[-1]) or [""])[-1]
           in numbers]
    return hit[0] if len(hit) == 1 else rng.choice(group)


def _groups(plan: twins.GradingPlan) -> list[list[twins.Member]]:
    out: dict[tuple, list[twins.Member]] = {}
    for m in plan.members:
        if m.kind in ("test", "twin"):
            out.setdefault((m.cls, m.real), []).append(m)
    return [g for g in out.values() if any(m.kind == "twin" for m in g)]


WEAK = f"{FILE}::test_pool_allocates"  # its every site is visible at base or in the instruction


def _base_rate(draws: int, **plan_kw) -> tuple[float, int]:
    rng = random.Random(3)
    hits = total = 0
    twinless = set()
    for seed in range(draws):
        task = _recorded(seed, **plan_kw)
        twinless |= set(GRADED) - {t.test for t in task.twins}
        plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=seed + 10_000)
        # the groups the guard counts (odds below 1): a fall-back site is a weak twin by design, counted as no
        # guard (WEAK's every site is visible; red team 7's R7-8 made more of this file's small values derived)
        strong = {t for t, v in guard.test_odds(task, {FILE: HIDDEN}, plan_kw.get("base", {}),
                                                 plan_kw.get("instruction", "")).items() if v < 1} if plan_kw else None
        for group in _groups(plan):
            test = next(m for m in group if m.kind == "test")
            if plan_kw and (test.test_id == WEAK or not any(twins.same_test(test.test_id, t) for t in strong or ())):
                continue
            hits += by_base_line(plan, group, BASE_FILE, INSTRUCTION, rng).kind == "test"
            total += 1
    return hits / max(total, 1), len(twinless)


def test_the_base_version_of_a_test_and_the_instruction_name_no_real_value():
    rate, twinless = _base_rate(80, base={FILE: BASE_FILE}, instruction=INSTRUCTION)
    assert rate < CHANCE + 0.1, rate
    rate_off, _ = _base_rate(80)  # the defence off: validation not told what the forger reads (values one step of
    assert rate_off > 0.4, rate_off  # arithmetic gives from the test's own numbers, `derived`, still kept off: 0.49)


def test_visible_values_are_never_a_site_nor_a_twin():
    task = _recorded(5, base={FILE: BASE_FILE}, instruction=INSTRUCTION)
    seen = {Decimal(t.value) for t in task.twins}
    assert not seen & {Decimal(48), Decimal(5), Decimal(37), Decimal(11), Decimal(3), Decimal(13)}, task.twins
    # the others keep a site no prior reads; test_pool_allocates has none left: it falls back to a weak twin
    # (a forger's guess is then no better than the prior, but never free), at a site with room, not 48 or 5
    assert {t.test for t in task.twins} == set(GRADED), task.twins
    fn = next(n for n in ast.walk(ast.parse(HIDDEN)) if isinstance(n, ast.FunctionDef)
              and n.name == "test_pool_allocates")
    avoid = twins.visible(BASE_FILE, None, "test_pool_allocates", INSTRUCTION)
    usable = twins._candidate_sites(twins.sites(fn), avoid, fall_back=False)
    assert [twins._number(twins.sites(fn)[i][0]) for i in usable] == []  # 48, 5 at base; 13 in the instruction


@pytest.mark.parametrize("value", [16, 64, 128, 4096, -256])
def test_a_site_a_prior_marks_is_not_tried(value):
    node = ast.parse(f"assert f() == {value}").body[0]
    fn = ast.parse(f"def test_x():\n    assert f() == {value}\n").body[0]
    assert isinstance(node, ast.Assert) and isinstance(fn, ast.FunctionDef)
    assert twins._candidate_sites(twins.sites(fn), fall_back=False) == []


def test_a_test_whose_only_sites_a_prior_reads_still_gets_a_weak_twin_site():
    """A leaky twin costs a forger a guess (0.76-0.92 per test measured above); no twin costs nothing. So a
    test with no site a prior cannot read falls back to a readable one, instead of going twinless."""
    fn = ast.parse("def test_x():\n    assert f() == 64\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert twins._candidate_sites(twins.sites(fn), fall_back=False) == []
    assert twins._candidate_sites(twins.sites(fn)) == [0]


def by_sign(members: list[str], rng: random.Random) -> str:
    """Counts, sizes and ids are positive: never bet on a member that is zero or negative."""
    positive = [m for m in members if ast.literal_eval(m) > 0]
    return rng.choice(positive or members)


def _small_rate(draws: int = 4000, width: int = twins.K) -> float:
    rng = random.Random(11)
    hits = total = 0
    for _ in range(draws):
        value = rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 0.3, 0.5])
        fn = ast.parse(f"def test_x():\n    assert f() == {value}\n").body[0]
        assert isinstance(fn, ast.FunctionDef)
        if not twins._candidate_sites(twins.sites(fn), fall_back=False):
            continue  # no site: twinless
        real, others = twins.values(value, rng, width)
        members = [real, *rng.sample(others, twins.K)]
        rng.shuffle(members)
        hits += by_sign(members, rng) == real
        total += 1
    return hits / max(total, 1)


def test_small_values_keep_their_sign_in_every_member(monkeypatch):
    # no small value has K values of its shape on each side (R8-1: `twins.value_shape`): none is a strong site
    assert not any(twins._candidate_sites(twins.sites(ast.parse(f"def test_x():\n    assert f() == {v}\n").body[0]),
                                          fall_back=False) for v in [2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 0.3, 0.5])
    assert _small_rate() == 0.0  # no strong group at all: nothing for the sign to single out
    monkeypatch.setattr(twins, "values", _old_values)  # the defence off
    monkeypatch.setattr(twins, "_candidate_sites", _old_sites)
    assert _small_rate(width=twins.CANDIDATES) > CHANCE + 0.05  # about 0.32: K of a wider progression


ECHO_FILE = "test/test_queue.py"
ECHO = '''from pkg.queue import Queue


def test_capacity_is_kept():
    q = Queue(capacity=37)
    assert q.capacity() == 37
    assert q.size() == 58
'''


def by_echo(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """The expected value is often an input written again: bet on the member whose differing literal the
    test also writes somewhere else."""
    lines = _differing_lines(plan, group)
    hits = []
    for m in group:
        literal = (re.findall(r"-?\d+(?:\.\d+)?", lines.get(m, "").split("==")[-1]) or [""])[-1]
        text = plan.texts[m.file]
        body = text[text.index(f"def {m.name}("):].split("\n\n")[0]
        hits += [m] if literal and len(re.findall(rf"(?<![\w.]){re.escape(literal)}(?![\w.])", body)) > 1 else []
    return hits[0] if len(hits) == 1 else rng.choice(group)


def _echo_rate(draws: int = 60) -> float:
    rng = random.Random(5)
    hits = total = 0
    graded = [f"{ECHO_FILE}::test_capacity_is_kept"]
    for seed in range(draws):
        task = Task(task_id="o__r-3", repo="o/r", profile="p", pr_number=3, title="t", base_commit="a" * 40,
                    merge_commit="b" * 40, family="scheduling-memory", created_at="2026-01-01T00:00:00Z",
                    test=TestSpec(runner="pytest", files=[ECHO_FILE]), FAIL_TO_PASS=graded)
        plan = twins.grading_plan(task, {ECHO_FILE: ECHO}, seed=seed, candidates=True)
        run = SimpleNamespace(twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"},
                              shapes={})
        task.twins, _ = twins.select(graded, [run], [run], random.Random(seed))
        plan = twins.grading_plan(task, {ECHO_FILE: ECHO}, seed=seed + 1)
        for group in _groups(plan):
            hits += by_echo(plan, group, rng).kind == "test"
            total += 1
    return hits / max(total, 1)


def test_a_value_the_test_writes_elsewhere_is_never_a_site_nor_a_twin(monkeypatch):
    assert _echo_rate() < CHANCE + 0.12
    monkeypatch.setattr(twins, "_elsewhere", lambda fn, nodes: frozenset())  # the defence off
    assert _echo_rate() > 0.8  # about 0.92


# --- the base prior in production: validation and grading as `sweserve` runs them ---------------------------------
#
# The same attack as `by_base_line`, end to end on the local test backend (tests/local_backend.py: the trial
# pipeline, the verifier and the boot script through the `Sandbox` protocol, no Docker): the PR keeps the line
# `assert pool.pages() == 43` of the base version of its test and adds a call to a new API before it, so at base
# every member fails alike (AttributeError) and a twin at 43 passes validation's failure comparison. The
# forger, code the tests import, reads the base test (it is in the candidate's own checkout) and passes the one
# planted test whose differing line is a line of it.

POOL = ("class Pool:\n    def __init__(self, size):\n        self.size = size\n\n"
        "    def pages(self):\n        return self.size >> 2\n")  # not `// 4`: 173 // 4 is 43 (`twins.Crossing`)
POOL_FIXED = POOL + ("\n    def reserve(self, n):\n        self.reserved = n\n\n"
                     "    def free(self):\n        return self.size - 2 * self.reserved - 6\n")  # 149: no one step
# of arithmetic on the test's other numbers (173, 9, 43) gives it (`twins.derived`); not 172, which 43 divides
# (`twins.related`: a weak site)
POOL_BASE_TEST = ("from pool import Pool\n\n\ndef test_pool_pages():\n    pool = Pool(size=173)\n"
                  "    assert pool.pages() == 43\n")
POOL_TEST = ("from pool import Pool\n\n\ndef test_pool_pages():\n    pool = Pool(size=173)\n    pool.reserve(9)\n"
             "    assert pool.pages() == 43\n    assert pool.free() == 149\n")
POOL_PROFILE = {"repo": "o/pool", "test_paths": ["tests/*"], "env_packages": [],
                "family_rules": [{"family": "scheduling-memory", "paths": ["*"]}]}
BASE_LINE_FORGER = '''

import inspect as _inspect

import _pytest.python as _py

_BASE = {_ln.strip() for _ln in BASE_TEXT.splitlines() if _ln.strip()}
_orig = _py.Function.runtest


def _body(item):
    try:
        return [_ln.strip() for _ln in _inspect.getsource(item.obj).splitlines()[1:]]
    except (OSError, TypeError):
        return None


def _runtest(self):
    mine = _body(self)
    group = [b for b in (_body(i) for i in self.session.items) if b is not None and mine is not None
             and len(b) == len(mine) and sum(x != y for x, y in zip(b, mine)) <= 1]
    rows = {r for b in group for r in range(len(b)) if b[r] != mine[r]} if mine else set()
    if len(rows) == 1:
        row = rows.pop()
        hits = [b for b in group if b[row] in _BASE]
        if len(hits) == 1 and hits[0] == mine:
            return None  # the member whose line the base version of the test writes: passed
    return _orig(self)


_py.Function.runtest = _runtest
'''


@pytest.fixture
def pool_task(make_repo, tmp_path):
    import json

    from local_backend import LocalHost, diff_of

    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.project import Project
    from sweserve.evaluation.context import Context
    from sweserve.models import Resources, TaskBundle

    repo = make_repo("pool")
    base = repo.commit("init", {"pool.py": POOL, "tests/__init__.py": "", "tests/test_pool.py": POOL_BASE_TEST})
    oracle = diff_of(repo, base, "pool.py", POOL_FIXED)
    tests = diff_of(repo, base, "tests/test_pool.py", POOL_TEST)
    (tmp_path / "config" / "profiles").mkdir(parents=True)
    (tmp_path / "config" / "profiles" / "local.json").write_text(json.dumps(POOL_PROFILE))
    task = Task(task_id="o__pool-1", repo="o/pool", profile="local", pr_number=1, title="t", base_commit=base,
                merge_commit=base, family="scheduling-memory", created_at="2026-01-01T00:00:00Z",
                resources=Resources(test_timeout_s=120), test=TestSpec(files=["tests/test_pool.py"]))
    bundle = TaskBundle(task=task, instruction="Pools take a reservation; free() counts what is left.",
                        oracle_patch=oracle, tests_patch=tests)
    search = ConfigSearch(tmp_path / "config")
    ctx = Context(LocalHost("run1", []), Project(tmp_path / "state", search, repo.path))
    yield bundle, ctx
    ctx.close()


def _validate_and_forge(bundle, ctx, tmp_path, name: str):
    from sweserve.agents.command import CommandAgent
    from sweserve.evaluation.trial import evaluate_task
    from sweserve.evaluation.validation import ValidateRequest, validate_task
    from sweserve.models import ValidationRecord

    task = bundle.task
    task.FAIL_TO_PASS, task.PASS_TO_PASS, task.twins, task.validation = [], [], [], None
    outcome = validate_task(ctx, ValidateRequest(tmp_path / name / task.task_id, bundle, runs=1, record=False))
    assert outcome.status == "valid", outcome.reason
    assert task.FAIL_TO_PASS == ["tests/test_pool.py::test_pool_pages"], task.FAIL_TO_PASS
    task.validation = ValidationRecord(status="valid", runs=1)  # as recorded (record=False: nothing written)
    forger = BASE_LINE_FORGER.replace("BASE_TEXT", repr(POOL_BASE_TEST))
    agent = CommandAgent(f"cat >> pool.py <<'SWEOF'\n{forger}\nSWEOF\n", name=f"forge-base-line-{name}")
    return outcome, evaluate_task(ctx, bundle, agent, results_path=tmp_path / name / "r.jsonl")


def test_production_validation_reads_the_base_version_of_each_hidden_test(pool_task, tmp_path):
    """As `sweserve validate` and `sweserve run` do it: the twins' site is never the line the base test writes,
    so the forger finds no member whose line it knows and the unsolved test fails."""
    bundle, ctx = pool_task
    validated, r = _validate_and_forge(bundle, ctx, tmp_path, "defended")
    fn = next(n for n in ast.walk(ast.parse(POOL_TEST)) if isinstance(n, ast.FunctionDef))
    assert bundle.task.twins and {twins._number(twins.sites(fn)[t.site][0]) for t in bundle.task.twins} == {149}
    assert validated.forge_odds == 0.25  # one group of four no prior reads: the forger guesses right once in four
    assert r.status == "failed", (r.status, r.reason, r.tests)


def test_without_the_base_version_validation_twins_the_line_a_forger_reads(pool_task, tmp_path, monkeypatch):
    """The defence off (the verifier not passing the base files to the plan, as before): validation twins the
    site 43, the base test's own line, and the forger passes exactly the real test: `resolved`."""
    from sweserve.evaluation import verifier

    real = verifier.plan_of
    monkeypatch.setattr(verifier, "plan_of", lambda bundle, sources, based, *a: real(bundle, sources, {}, *a))
    bundle, ctx = pool_task
    validated, r = _validate_and_forge(bundle, ctx, tmp_path, "undefended")
    fn = next(n for n in ast.walk(ast.parse(POOL_TEST)) if isinstance(n, ast.FunctionDef))
    assert {twins._number(twins.sites(fn)[t.site][0]) for t in bundle.task.twins} == {43}, bundle.task.twins
    # the forge odds read the base file in the clone themselves: the group at the base test's line is no guard
    assert validated.forge_odds == 1.0
    assert r.status == "resolved", (r.status, r.reason, r.tests)


def test_numbers_an_instruction_spells_in_words_are_read_as_its_digits_are():
    """A forger reads `thirteen` as it reads `13`: `visible` avoids both, in runs and on their own."""
    said = twins.visible(None, None, "test_x", "It must take one hundred and four pages, twenty-one slots, a "
                                               "dozen blocks; the third page; two thousand three hundred tokens.")
    assert {Decimal(n) for n in (104, 21, 12, 3, 2300, 100, 4, 1)} <= said
    assert Decimal(5) not in said and Decimal(13) not in said
    base = "def test_old():\n    assert pages(100) == 13  # rounds down to 12\n\n\ndef test_y():\n    assert f(-7) == 0\n"
    assert {Decimal(13), Decimal(12), Decimal(-7)} <= twins.visible(base, None, "test_new")  # the whole base file


def test_a_huge_number_in_the_instruction_takes_no_part_in_derived_values():
    """A commit hash in a real instruction (`6e854218`) reads as 6 * 10^854218: `derived` took `int()` of it and
    validation's plan hung on a real sglang-jax task. Such a number takes no part; the others still combine."""
    import time

    start = time.monotonic()
    out = twins.derived(frozenset({Decimal("6E+854218"), Decimal(100), Decimal(8), Decimal("1E-40")}))
    assert time.monotonic() - start < 2
    assert Decimal(13) in out and Decimal(108) in out
    assert not any(abs(v.adjusted()) > 40 for v in out)
    task = _task()
    start = time.monotonic()
    twins.grading_plan(task, {FILE: HIDDEN}, seed=0, candidates=True, instruction="Fixed in 6e854218 and 1e999999.")
    assert time.monotonic() - start < 10
