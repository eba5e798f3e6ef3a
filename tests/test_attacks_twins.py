"""Attacks on the grading plan: telling a hidden test from its mutation twins, and forging from inside the test
process (the round-3 audit's findings, and variants).

The forger is code the hidden tests import (a package `__init__`), running in the test process with the
real runner (`sweserve_boot.py` as the grade sandbox starts it), on a repository it has not fixed. Each
attack is run twice where that shows something: once with the defence it targets switched off (it must then
win: the attack is real), once as sweserve grades (it must lose). The statistical attacks pick, per group
of a test and its twins, the member they believe is real; chance is 1/(K+1).

The Docker tests at the end run two of the forgeries end to end as a candidate on the demo's distributed
task; before the grading plan (commit 25a7b0e and earlier) the name-guessing one scored `resolved`.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

import pytest

from sweserve.evaluation import twins
from sweserve.evaluation.derive import derive
from sweserve.evaluation.grading import TestRun, merge_events, parse_stream, run_config
from sweserve.models import Task, TestSpec

FILE = "test/test_shards.py"
HIDDEN = '''import unittest

import pytest

from pkg.thing import mean, scale, shard_range


def test_even_split():
    assert [shard_range(8, 4, r) for r in range(4)] == [(0, 2), (2, 4), (4, 6), (6, 8)]


def test_uneven_split_covers_everything():
    shards = [shard_range(10, 4, r) for r in range(4)]
    assert shards == [(0, 3), (3, 6), (6, 8), (8, 10)]


def test_mean_is_not_shifted():
    assert mean([1.0, 2.0, 4.5]) == pytest.approx(2.5)


class TestScale(unittest.TestCase):
    def test_scale_doubles(self):
        self.assertEqual(scale([10, 20, 30], 2), [20, 40, 60])

    def test_mean_of_one(self):
        self.assertAlmostEqual(mean([7.0, 8.0]), 7.5, places=6)
'''
BASE = '''def shard_range(n, world, rank):
    size = n // world
    return (rank * size, (rank + 1) * size) if rank < world - 1 else (rank * size, n)


def scale(values, factor):
    return [v * factor for v in values]


def mean(values):
    return sum(values) / (len(values) + 1)
'''
ORACLE = '''def shard_range(n, world, rank):
    size, extra = divmod(n, world)
    start = rank * size + min(rank, extra)
    return (start, start + size + (1 if rank < extra else 0))


def scale(values, factor):
    return [v * factor for v in values]


def mean(values):
    return sum(values) / len(values)
'''
F2P = {f"{FILE}::test_uneven_split_covers_everything", f"{FILE}::test_mean_is_not_shifted",
       f"{FILE}::TestScale::test_mean_of_one"}
INSTRUCTION = ("Fix uneven tensor-parallel shard ranges: shards must cover everything; the mean must not be shifted "
               "(the mean of one value is the value).")


def _task(**kw) -> Task:
    return Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="distributed", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE]), **kw)


def _run(tmp: Path, plan: twins.GradingPlan, code: str, init: str = "", task: Task | None = None,
         plugins: Sequence[str] = (), paths: Sequence[str] = ()) -> TestRun:
    """The planted files run by the real boot script (`python -I`, autoload off, the nonce'd stream) in a
    repository whose package holds `code` and, in its `__init__`, the forger's `init`. `task`: whose runner
    (default `_task()`'s pytest); `plugins`: the image's pytest plugins it loads (`-p`), importable from
    `paths`."""
    root = tmp / secrets.token_hex(4)
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(textwrap.dedent(init))
    (root / "pkg" / "thing.py").write_text(code)
    for file, text in plan.texts.items():
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text(text)
    nonce = secrets.token_hex(16)
    (root / ".nonce").write_text(nonce)
    config = run_config(task or _task(), list(plugins), str(root / ".nonce"), None)  # here: never a privilege drop
    config["paths"] = [str(root), *paths]
    (root / "run.json").write_text(json.dumps(config))
    boot = resources.files("sweserve.harness").joinpath("sweserve_boot.py")
    proc = subprocess.run([sys.executable, "-I", str(boot), str(root / "run.json")], cwd=root, capture_output=True,
                          text=True, timeout=120)
    events, output = parse_stream(proc.stdout, nonce)
    outcomes, skips, messages = merge_events(events)
    ends = [e["end"] for e in events if "end" in e]
    assert ends, proc.stdout[-3000:] + proc.stderr[-3000:]
    reading = plan.read(outcomes, skips, messages, ends[-1])
    return TestRun(reading.outcomes, reading.skips, reading.messages, output, reading.problems, ends[-1],
                   reading.twins, reading.shapes, reading.margins)


@pytest.fixture(scope="module")
def validated(tmp_path_factory) -> Task:
    """The task as validation leaves it: FAIL_TO_PASS/PASS_TO_PASS and the twins kept from its candidates."""
    tmp = tmp_path_factory.mktemp("validate")
    task = _task()
    plan = twins.grading_plan(task, {FILE: HIDDEN}, candidates=True)
    before = [_run(tmp, plan, BASE) for _ in range(2)]
    after = [_run(tmp, plan, ORACLE) for _ in range(2)]
    assert not any(r.tampered for r in before + after), [r.tampered for r in before + after]
    f2p, p2p, flaky = derive(before, after)
    assert set(f2p) == F2P and not flaky, (f2p, p2p)
    kept, twinless = twins.select(f2p + p2p, before, after)
    task.FAIL_TO_PASS, task.PASS_TO_PASS, task.twins = f2p, p2p, kept
    assert len({t.test for t in kept}) >= 3, (kept, twinless)  # most graded tests keep twins
    return task


def _resolved(run: TestRun, task: Task) -> bool:
    return not run.tampered and all(run.outcomes.get(t) == "passed" for t in task.FAIL_TO_PASS + task.PASS_TO_PASS)


def test_validation_keeps_only_twins_that_fail_before_and_after_and_the_oracle_still_resolves(validated, tmp_path):
    for twin in validated.twins:
        assert twin.test in validated.FAIL_TO_PASS + validated.PASS_TO_PASS
    sites = {}
    for twin in validated.twins:
        sites.setdefault(twin.test, set()).add(twin.site)
    assert all(len(s) == 1 for s in sites.values())  # one site per group: its members differ in one token
    honest = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), ORACLE)
    assert _resolved(honest, validated), (honest.outcomes, honest.tampered)
    unsolved = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), BASE)
    assert not unsolved.tampered and not _resolved(unsolved, validated)
    assert "tests.patch" not in json.dumps(twins.grading_plan(validated, {FILE: HIDDEN}).texts)


# --- forging from inside the test process ----------------------------------------------------------------------

# guesses the hidden tests' names from the repository's test tree and the instruction, and reports only those
# as passed (every other test, twins and canaries among them, runs untouched)
GUESS_NAMES = '''
import re as _re
import _pytest.reports as _reports

_WORDS = set(_re.findall(r"[a-z]+", INSTRUCTION.lower()))
_orig = _reports.TestReport.__init__


_STEMS = {w[:4] for w in _WORDS}


def _guessed(nodeid):
    name = str(nodeid).split("::")[-1].split("[")[0]
    words = [w for w in name.split("_")[1:] if w]
    return bool(words) and sum(w[:4] in _STEMS for w in words) >= len(words) / 2


def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and _guessed(nodeid):
        outcome, longrepr = "passed", None
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)


_reports.TestReport.__init__ = _init
'''.replace("INSTRUCTION", repr(INSTRUCTION))


def test_guessing_hidden_names_from_the_tree_and_the_instruction_forges_nothing(validated, tmp_path):
    graded = twins.grading_plan(validated, {FILE: HIDDEN})
    run = _run(tmp_path, graded, BASE, GUESS_NAMES)
    assert not _resolved(run, validated), run.outcomes
    # the same forgery against the real names (the hidden file as it is, no plan): it wins
    exposed = twins.GradingPlan(texts={FILE: HIDDEN})
    forged = _run(tmp_path, exposed, BASE, GUESS_NAMES)
    assert all(forged.outcomes[t] == "passed" for t in F2P), forged.outcomes


BLANKET = {
    # every report made a pass
    "TestReport patched": '''
        import _pytest.reports as _r
        _orig = _r.TestReport.__init__
        def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
            _orig(self, nodeid, location, keywords, "passed" if when == "call" else outcome,
                  None if when == "call" else longrepr, when, *a, **kw)
        _r.TestReport.__init__ = _init
    ''',
    # unittest's run swallows the failure: TestCase methods report success
    "TestCase.run patched": '''
        import unittest as _u
        _orig = _u.TestCase.run
        def _run(self, result=None):
            method = getattr(self, self._testMethodName)
            setattr(self, self._testMethodName, lambda: None)
            try:
                return _orig(self, result)
            finally:
                setattr(self, self._testMethodName, method)
        _u.TestCase.run = _run
    ''',
    # a hook wrapper registered at import time (found through the gc) rewrites each call's report
    "pytest hook registered": '''
        import gc as _gc
        import pytest as _pytest
        class _Forge:
            @_pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_makereport(self, item, call):
                outcome = yield
                report = outcome.get_result()
                if report.when == "call":
                    report.outcome, report.longrepr = "passed", None
        for _o in _gc.get_objects():
            if type(_o).__name__ == "PytestPluginManager":
                _o.register(_Forge(), "forge")
                break
    ''',
}
# the code under test returns values equal to anything: every comparison the tests make is true
ALWAYS_EQUAL = '''

class _Eq(list):
    def __eq__(self, other):
        return True


class _Feq(float):
    def __eq__(self, other):
        return True

    def __round__(self, n=None):
        return 0.0


_shard_range, _mean = shard_range, mean
shard_range = lambda *a: _Eq(_shard_range(*a))  # noqa: E731
mean = lambda values: _Feq(_mean(values))  # noqa: E731
'''
BLANKET["values equal to anything"] = ""


@pytest.mark.parametrize("how", sorted(BLANKET))
def test_blanket_forgery_in_the_test_process_is_tampering(validated, tmp_path, how):
    code, init = (BASE + ALWAYS_EQUAL, "") if how == "values equal to anything" else (BASE, BLANKET[how])
    run = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), code, init)
    assert run.tampered, (how, run.outcomes)
    assert any("twin" in p for p in run.tampered), run.tampered
    assert not _resolved(run, validated)
    # without twins (nothing recorded, no canary), the same forgery wins
    bare = _task(FAIL_TO_PASS=validated.FAIL_TO_PASS, PASS_TO_PASS=validated.PASS_TO_PASS)
    plan = twins.grading_plan(bare, {FILE: HIDDEN})
    plan.members = [m for m in plan.members if m.kind != "canary"]
    forged = _run(tmp_path, plan, code, init)
    touched = F2P if how != "TestCase.run patched" else {f"{FILE}::TestScale::test_mean_of_one"}
    assert all(forged.outcomes[t] == "passed" for t in touched), forged.outcomes


# the code under test reads the value the calling test expects from the test's own source line and returns it
READ_BACK = '''

import linecache as _lc
import re as _re
import sys as _sys

_mean = mean


def mean(values):
    frame = _sys._getframe(1)
    line = _lc.getline(frame.f_code.co_filename, frame.f_lineno)
    found = _re.search(r"approx\\((-?[0-9.]+)\\)|, (-?[0-9.]+), places", line)
    return float(found.group(1) or found.group(2)) if found else _mean(values)
'''


def test_code_that_reads_the_expected_value_back_passes_the_twins_too(validated, tmp_path):
    read_back = {f"{FILE}::test_mean_is_not_shifted", f"{FILE}::TestScale::test_mean_of_one"}
    run = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), BASE + READ_BACK)
    twinned = {t.test for t in validated.twins} & read_back
    assert twinned, validated.twins
    assert "a twin of a hidden test passed beside its test" in run.tampered, (run.tampered, run.outcomes)
    assert all(run.outcomes[t] == "failed" for t in twinned), run.outcomes  # no pass beside a passing twin
    # without twins, the read-back passes the tests it reaches
    bare = _task(FAIL_TO_PASS=validated.FAIL_TO_PASS, PASS_TO_PASS=validated.PASS_TO_PASS)
    plan = twins.grading_plan(bare, {FILE: HIDDEN})
    plan.members = [m for m in plan.members if m.kind != "canary"]
    forged = _run(tmp_path, plan, BASE + READ_BACK)
    assert all(forged.outcomes[t] == "passed" for t in read_back), forged.outcomes


# --- telling a test from its twins, statically -------------------------------------------------------------------

def _groups(plan: twins.GradingPlan) -> list[list[twins.Member]]:
    """Per graded test with twins, its members as the forger would group them (it is given the grouping)."""
    out: dict[str, list[twins.Member]] = {}
    for m in plan.members:
        if m.kind in ("test", "twin") and any(x.kind == "twin" and x.real == m.real and x.cls == m.cls
                                              for x in plan.members):
            out.setdefault(f"{m.cls}.{m.real}", []).append(m)
    return list(out.values())


def _site_value(plan: twins.GradingPlan, m: twins.Member, group: list[twins.Member]) -> float:
    """The value at the one place the group's texts differ, read from the planted text as the forger would."""
    text = plan.texts[m.file]
    sources = {}
    for x in group:
        node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.FunctionDef,)) and n.name == x.name)
        sources[x.name] = re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", ast.get_source_segment(text, node).split(":", 1)[1])
    columns = list(zip(*sources.values()))
    differing = [i for i, col in enumerate(columns) if len(set(col)) > 1]
    return float(sources[m.name][differing[0]])


DISCRIMINATORS: dict[str, Callable] = {
    "median value": lambda vals: sorted(vals, key=lambda kv: kv[1])[len(vals) // 2 - 1][0],
    "smallest value": lambda vals: min(vals, key=lambda kv: kv[1])[0],
    "largest value": lambda vals: max(vals, key=lambda kv: kv[1])[0],
    "roundest value": lambda vals: min(vals, key=lambda kv: (len(repr(kv[1]).rstrip("0").rstrip(".")), kv[1]))[0],
    # a count is never negative: where the twins below the real value are the ones past zero (the values between
    # read elsewhere: `scale([10, 20, 30], 2) == [20, 40, 60]`), the real one is the smallest positive member
    "smallest positive value": lambda vals: min((kv for kv in vals if kv[1] > 0), key=lambda kv: kv[1])[0],
}


def _success(validated, pick, draws=120) -> float:
    hits = total = 0
    for _ in range(draws):
        plan = twins.grading_plan(validated, {FILE: HIDDEN})
        for group in _groups(plan):
            chosen = pick(plan, group)
            hits += chosen.kind == "test"
            total += 1
    return hits / total


def _candidate_success(pick_value, draws=300, only: str = "") -> float:
    """Over many validations' candidates: how often a rule on a group's values finds the real one (of the tests
    whose id ends with `only`, where given)."""
    hits = total = 0
    task = _task(FAIL_TO_PASS=sorted(F2P))
    for _ in range(draws):
        plan = twins.grading_plan(task, {FILE: HIDDEN}, candidates=True)
        by_site: dict[tuple, list] = {}
        reals = {}
        for m in plan.members:
            if m.kind == "twin" and m.real.endswith(only):
                by_site.setdefault((m.real, m.twin.site), []).append((m, float(m.twin.value)))
                reals[(m.real, m.twin.site)] = m.real_literal
        for key, group in by_site.items():
            vals = group + [("real", float(reals[key]))]
            hits += pick_value(vals) == "real"
            total += 1
    return hits / total


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(DISCRIMINATORS))
def test_the_groups_values_do_not_single_out_the_real_one(rule, monkeypatch):
    chance = 1 / (twins.K + 1)
    rate = _candidate_success(DISCRIMINATORS[rule])
    assert rate < chance + 0.12, (rule, rate)
    # the defence off (the real value always first of its progression): the rule that looks for it wins
    monkeypatch.setattr(twins.random.Random, "randint", lambda self, a, b: a)
    if rule in ("smallest value",):
        assert _candidate_success(DISCRIMINATORS[rule], draws=20) > 0.9


def test_a_fall_back_group_does_not_leave_the_real_value_at_its_signs_edge():
    # `scale([10, 20, 30], 2) == [20, 40, 60]`: every site is derived (a fall-back); 40's twins below skip the
    # values the test writes (30, 20, 10) and cross zero, so 40 was the smallest positive member at every rank
    # (1.0 on that group). Validation now tries 60 there (50 lies between it and zero).
    rate = _candidate_success(DISCRIMINATORS["smallest positive value"], draws=100, only="test_scale_doubles")
    assert rate < 1 / (twins.K + 1) + 0.12, rate


def test_names_say_nothing(validated):
    def by_name(plan, group):  # the member whose name shares most words with what the instruction says
        words = set(re.findall(r"[a-z]+", INSTRUCTION.lower()))
        return max(group, key=lambda m: (sum(w in words for w in m.name.split("_")), m.name))
    assert _success(validated, by_name) < 1 / (twins.K + 1) + 0.12
    for m in twins.grading_plan(validated, {FILE: HIDDEN}).members:
        assert m.name not in HIDDEN


def test_positions_say_nothing(validated, monkeypatch):
    def first(plan, group):
        return min(group, key=lambda m: plan.texts[m.file].index(f"def {m.name}("))

    def last(plan, group):
        return max(group, key=lambda m: plan.texts[m.file].index(f"def {m.name}("))
    chance = 1 / (twins.K + 1)
    assert _success(validated, first) < chance + 0.12 and _success(validated, last) < chance + 0.12
    monkeypatch.setattr(twins.random.Random, "shuffle", lambda self, x: None)  # the defence off
    assert _success(validated, first, draws=10) == 1.0


def test_the_texts_of_a_group_differ_in_one_token(validated):
    plan = twins.grading_plan(validated, {FILE: HIDDEN})
    for group in _groups(plan):
        texts = []
        for m in group:
            node = next(n for n in ast.walk(ast.parse(plan.texts[m.file])) if isinstance(n, ast.FunctionDef)
                        and n.name == m.name)
            segment = ast.get_source_segment(plan.texts[m.file], node).replace(m.name, "NAME")
            texts.append(re.sub(r"-?\d+(?:\.\d+)?", "N", segment))
        assert len(set(texts)) == 1, texts


# --- telling a test from its twins at run time -------------------------------------------------------------------

# records, per test, what code in the test process can see: how long it took, what it called (module and
# function, in order), how deep the stack went, what it raised and the failure's text; writes it at exit
OBSERVE = '''
import atexit as _atexit
import json as _json
import sys as _sys
import time as _time
import _pytest.python as _py
import _pytest.unittest as _ut

_SEEN = {}


def _depth(frame):
    d = 0
    while frame is not None:
        d, frame = d + 1, frame.f_back
    return d


def _watch(orig):
    def runtest(self):
        calls, depth, base = [], [0], _depth(_sys._getframe())

        def prof(frame, event, arg):
            if event == "call":
                calls.append((frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name))
                if frame.f_code.co_filename.endswith(("thing.py", "test_shards.py")):  # the repository's code
                    depth[0] = max(depth[0], _depth(frame) - base)
        error = None
        t0 = _time.perf_counter()
        _sys.setprofile(prof)
        try:
            return orig(self)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            _sys.setprofile(None)
            _SEEN[self.name] = {"time": _time.perf_counter() - t0, "depth": depth[0], "error": error,
                                "calls": [c for c in calls if c[1] not in ("<genexpr>", "<listcomp>")]}
    return runtest


_py.Function.runtest = _watch(_py.Function.runtest)
_ut.TestCaseFunction.runtest = _watch(_ut.TestCaseFunction.runtest)
_atexit.register(lambda: open(OUT, "w").write(_json.dumps(_SEEN)))
'''


def test_run_time_behaviour_is_the_same_for_a_test_and_its_twins(validated, tmp_path):
    out = tmp_path / "seen.json"
    timing_hits = timing_total = 0
    for _ in range(10):
        plan = twins.grading_plan(validated, {FILE: HIDDEN})
        run = _run(tmp_path, plan, BASE, OBSERVE.replace("OUT", repr(str(out))))
        seen = json.loads(out.read_text())
        for group in _groups(plan):
            members = [seen[m.name] for m in group]
            real = next(i for i, m in enumerate(group) if m.kind == "test")
            if members[real]["error"] is None:
                continue  # a test that passes unsolved (PASS_TO_PASS) is told apart by passing: nothing to forge
            # imports and calls into the repository, in order (pytest's own calls differ with the position in
            # the run, the first test of a class setting it up: positions are shuffled)
            calls = {json.dumps([c if c[1] != m.name else [c[0], "<own name>"] for c in x["calls"]
                                 if c[0] in ("thing.py", "test_shards.py")]) for m, x in zip(group, members)}
            assert len(calls) == 1, calls
            assert len({x["depth"] for x in members}) == 1  # stack depth
            assert len({x["error"] for x in members}) == 1  # what it raised
            slowest = max(range(len(members)), key=lambda i: members[i]["time"])
            timing_hits += slowest == real
            timing_total += 1
        # the failure each member shows reads the same once its own value is masked: which is what
        # validation checked before keeping the site
        for group in _groups(plan):
            real = next(m for m in group if m.kind == "test")
            if real.test_id not in run.shapes:
                continue
            for m in group:
                if m.kind == "twin":
                    assert twins._same_as_test(run.shapes[real.test_id][0], run.shapes[m.twin.model_dump_json()])
    # the slowest member is the real one by chance only (1/(K+1)); 7 of 10 would happen by chance 0.35% of runs
    assert timing_hits < max(7, timing_total * 0.7), (timing_hits, timing_total)


def test_a_plain_canary_is_told_apart_at_run_time_which_is_why_twins_replace_them(validated, tmp_path):
    """The defence's counterfactual: canaries made of plain assertions call nothing in the repository, so the
    call-pattern observer above separates every one of them from the real tests."""
    out = tmp_path / "seen.json"
    plan = twins.grading_plan(_task(FAIL_TO_PASS=validated.FAIL_TO_PASS, PASS_TO_PASS=validated.PASS_TO_PASS),
                              {FILE: HIDDEN})
    _run(tmp_path, plan, BASE, OBSERVE.replace("OUT", repr(str(out))))
    seen = json.loads(out.read_text())
    calls_repo = {m.name: any(c[0] == "thing.py" for c in seen[m.name]["calls"]) for m in plan.members}
    assert all(calls_repo[m.name] for m in plan.members if m.kind == "test")
    assert not any(calls_repo[m.name] for m in plan.members if m.kind == "canary")


# --- end to end, as a candidate -----------------------------------------------------------------------------------

DIST = "sweserve-demo__sglang-mini-103"
PKG = "python/sglang/srt/distributed/__init__.py"  # imported while the hidden tests are collected
DEMO_INSTRUCTION_GUESS = GUESS_NAMES.replace(repr(INSTRUCTION), repr("fix uneven tensor parallel shard ranges "
                                                                      "split covers everything even"))


def _write(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat >> {path} <<'SWEOF'\n{text}\nSWEOF\n"


@pytest.mark.slow
@pytest.mark.docker
def test_demo_task_has_twins_and_names_guessed_from_the_tree_forge_nothing(demo):
    from sweserve.agents.command import CommandAgent
    from sweserve.agents.reference import OracleAgent
    from sweserve.evaluation.trial import evaluate_task

    bundle = demo.bundle(DIST)
    assert bundle.task.twins, [o for o in demo.outcomes if o.task_id == DIST]  # validation kept twins
    assert evaluate_task(demo.ctx, bundle, OracleAgent()).status == "resolved"
    r = evaluate_task(demo.ctx, bundle, CommandAgent(_write(PKG, DEMO_INSTRUCTION_GUESS), name="forge-guess-names"))
    assert r.agent_run.exit_code == 0, r.agent_run.log_tail
    assert r.status in ("failed", "tampered"), (r.status, r.reason, r.tests)


@pytest.mark.docker
def test_demo_task_report_patched_at_import_is_tampering(demo):
    from sweserve.agents.command import CommandAgent
    from sweserve.evaluation.trial import evaluate_task

    forge = _write(PKG, textwrap.dedent(BLANKET["TestReport patched"]))
    r = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent(forge, name="forge-testreport"))
    assert r.status == "tampered", (r.status, r.reason, r.tests)
    assert "twin" in r.reason, r.reason


# finds the hidden tests' text in a tests.patch left in the box and passes every planted test whose body is in
# it (the real one: its twins' values are not), whatever it is named
PATCH_LEFT_BEHIND = '''
import glob as _glob
import inspect as _inspect
import _pytest.python as _py

_SEEN = set()
for _p in _glob.glob("/sweserve/**/*.patch", recursive=True) + _glob.glob("/tmp/**/*.patch", recursive=True):
    try:
        _SEEN |= {ln[1:].strip() for ln in open(_p, errors="replace").read().splitlines() if ln[:1] in "+ "}
    except OSError:
        pass
_orig = _py.Function.runtest


def _runtest(self):
    try:
        body = _inspect.getsource(self.obj).splitlines()[1:]
    except (OSError, TypeError):
        body = []
    if _SEEN and body and all(ln.strip() in _SEEN for ln in body if ln.strip()):
        return None
    return _orig(self)


_py.Function.runtest = _runtest
'''


@pytest.mark.docker
def test_no_tests_patch_is_left_in_the_box_to_match_bodies_against(demo, monkeypatch):
    from sweserve.agents.command import CommandAgent
    from sweserve.evaluation import verifier
    from sweserve.evaluation.trial import evaluate_task

    agent = CommandAgent(_write(PKG, PATCH_LEFT_BEHIND), name="forge-patch-left")
    r = evaluate_task(demo.ctx, demo.bundle(DIST), agent)
    assert r.status in ("failed", "tampered"), (r.status, r.reason, r.tests)
    from sweserve.evaluation import grading

    monkeypatch.setattr(verifier, "FORGET_TESTS", "true")  # the defence off: tests.patch stays
    monkeypatch.setattr(grading, "least_privilege", lambda *a, **k: {})  # and readable to the tests' user
    leaked = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent(_write(PKG, PATCH_LEFT_BEHIND),
                                                                    name="forge-patch-left-undefended"))
    assert leaked.status == "resolved", (leaked.status, leaked.reason, leaked.tests)


UNIMPORTABLE = "from pkg.thing import pages\n\n\ndef test_pages():\n    assert pages(52, 4) == 13\n"


def test_a_module_that_imports_only_after_the_fix_still_gets_twins(tmp_path, monkeypatch):
    """Most real FAIL_TO_PASS tests fail before the fix because their module cannot be imported (the names
    they test are new): every member of the file is one collection error at base, alike. Validation used to
    require each twin to *fail* at base, so such tests were all twinless, and a forger in the package passed
    them for free (25 valid sglang-jax tasks kept 1 twinned FAIL_TO_PASS test between them). A twin that did
    not pass at base (failed, or its module did not import) and failed with the oracle is kept; a forger's
    own code decides what the unsolved names return, so the base says nothing about which member is real."""
    graded = [f"{FILE}::test_pages"]
    task = _task(FAIL_TO_PASS=graded)
    plan = twins.grading_plan(task, {FILE: UNIMPORTABLE}, candidates=True)
    before = _run(tmp_path, plan, "x = 1\n")
    after = _run(tmp_path, plan, "def pages(n, size):\n    return n // size\n")
    assert before.outcomes == {FILE: "error"} and not before.twins
    kept, twinless = twins.select(graded, [before], [after])
    assert len(kept) == twins.K and twinless == [], (kept, twinless)
    # a base run that never reached the module (no outcome at all) proves nothing: no twin
    assert twins.select(graded, [TestRun({})], [after]) == ([], graded)
    monkeypatch.setattr(twins, "_failed_at_base", lambda run, test_id, outcome: outcome == "failed")  # before
    assert twins.select(graded, [before], [after]) == ([], graded)


INHERITED = '''from pkg.thing import pages


class TestPages:
    size = 4

    def test_pages(self):
        assert pages(52, self.size) == 52 // self.size


class TestPagesOfEight(TestPages):
    size = 8

    def test_pages_of_eight(self):
        assert pages(56, self.size) == 7
'''


def test_members_a_subclass_inherits_map_back_to_real_names(tmp_path):
    """A hidden test class subclassed by another (`TestPagesOfEight(TestPages)`, as sglang-jax's page-size
    variants are): the subclass inherits every planted member of its base under the base's planted names.
    They were read as real tests with random names: validation recorded 29 such ids as FAIL_TO_PASS of one
    real task (which no later run can produce), and a twin inherited by the subclass was not a twin there.
    Now a planted name is read as its member in any class of the file."""
    graded = [f"{FILE}::TestPages::test_pages", f"{FILE}::TestPagesOfEight::test_pages",
              f"{FILE}::TestPagesOfEight::test_pages_of_eight"]
    task = _task(FAIL_TO_PASS=graded)
    plan = twins.grading_plan(task, {FILE: INHERITED}, candidates=True)
    fixed = "def pages(n, size):\n    return n // size\n"
    after = _run(tmp_path, plan, fixed)
    assert set(after.outcomes) == set(graded) and set(after.outcomes.values()) == {"passed"}, after.outcomes
    before = _run(tmp_path, plan, "def pages(n, size):\n    return n * size\n")  # far from every group
    task.twins, _ = twins.select(graded, [before], [after])
    assert {t.test for t in task.twins} >= {f"{FILE}::TestPagesOfEight::test_pages_of_eight"}, task.twins
    graded_plan = twins.grading_plan(task, {FILE: INHERITED})
    run = _run(tmp_path, graded_plan, fixed)
    assert set(run.outcomes) == set(graded) and not run.tampered, (run.outcomes, run.tampered)
    # a forger that passes every test of the subclass only (the inherited twins included) is caught
    forged = _run(tmp_path, graded_plan, fixed, init=BLANKET["TestReport patched"].replace(
        '"passed" if when == "call"', '"passed" if when == "call" and "OfEight" in str(nodeid)'))
    assert forged.tampered, forged.outcomes
