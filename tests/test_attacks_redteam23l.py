r"""Red team 23l: telling the real member of a twin group from its twins by whether the group could have been drawn
around each member (`twins.values`' walk, `_room`, `_sides`).

The forger reads its planted test file (every member of a group is there) and runs sweserve's own code, which is
public: for each member m, it asks whether the site's walk around m (m's own `value_shape`, the avoid set read from
the file with m written at the site) could give this group. The real member always could; a twin may not, and then
it is a twin for sure. Measured as red teams 6, 8 and 9 do: validation's own draws (`grading_plan(candidates=True)`,
`select` on runs where every candidate fails and no margin passes), the forger's expected win (1 / the members
left, 0 where the real one was struck) against the guard's recorded odds (`guard.forge_odds(guard.test_odds(...))`).

- R23l-1 (forge odds): a shaped group (a strong site) is drawn only where the *real* value has K values of its shape
  on each side (`_room`); a member near the end of its shape's run (the value's length as written is part of the
  shape: 83's run of two-digit values ends at 97) has no such room, so a group drawn around it would have been an
  unshaped one. Group {83, 89, 91, 97}: 89, 91 and 97 lack room above, so 83 is the real one. On 83 and 983 the
  forger wins 0.55 where the guard records 0.25.
"""

from __future__ import annotations

import ast
import random
from decimal import Decimal
from types import SimpleNamespace

import pytest

from sweserve.evaluation import guard, twins
from sweserve.models import Task, TestSpec, Twin

FILE = "test/test_sizes.py"
GRADED = [f"{FILE}::test_size_of_block"]


def _source(value: int) -> str:
    return f"from pkg.thing import size_of\n\n\ndef test_size_of_block():\n    assert size_of(3) == {value}\n"


def _task() -> Task:
    return Task(task_id="o__r-23", repo="o/r", profile="p", pr_number=23, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="distributed", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE]), FAIL_TO_PASS=list(GRADED))


def _spares(text: str) -> frozenset[Decimal]:
    """What `grading_plan` keeps the site's twins off, for the file as written (no base, instruction or
    repository: the task above has none)."""
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef))
    outside = twins.around(text, fn)
    avoid = twins.visible(None, None, fn.name, "") | outside
    fn_sites = twins.sites(fn)
    return twins._spares(fn_sites, avoid, fn, twins._near(fn_sites, avoid, fn, beside=outside | twins.said("")))[0]


def _could_be_real(member: Decimal, group: set[Decimal]) -> bool:
    """Whether `values` could draw `group` around `member` (at some rank), reading the file with `member` at the
    site: the forger's test, with sweserve's own functions."""
    value = int(member)
    avoid = _spares(_source(value))
    below, above = twins._sides(value, twins.K, avoid, keep_sign=False, shaped=twins._room(value, twins.K, avoid))
    return any({member, *below[:r], *above[:twins.K - r]} == group for r in range(twins.K + 1))


def _room_bet(value: int, draws: int = 8) -> tuple[float, float, int]:
    """(the forger's mean expected win, the guard's mean recorded odds, groups kept) over validation's draws."""
    wins, recorded = [], []
    for seed in range(draws):
        task = _task()
        plan = twins.grading_plan(task, {FILE: _source(value)}, seed=seed, candidates=True)
        run = SimpleNamespace(
            twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin" and m.twin},
            margins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "margin" and m.twin},
            shapes={})
        task.twins, _ = twins.select(GRADED, [run], [run], random.Random(f"select-{seed}"))
        if not task.twins:
            continue
        recorded.append(guard.forge_odds(guard.test_odds(task, {FILE: _source(value)}, {}, "")))
        group = {Decimal(t.value) for t in task.twins} | {Decimal(value)}
        left = [m for m in group if _could_be_real(m, group)]
        wins.append(1 / len(left) if Decimal(value) in left else 0.0)
    return sum(wins) / max(len(wins), 1), sum(recorded) / max(len(recorded), 1), len(wins)


XFAIL = ("R23l-1: a twin without room for its own group is struck. Tried twice: redrawing a group unshaped where a "
         "member lacks `_room` (and the guard counting such a group as none) fixes these, and raises recorded odds "
         "from 0.25 to 0.81 on red team 11's strong-site control and on red team 4, 8 and 9 fixtures: `_sides` walks "
         "10K+10 steps, so an end member of a sparse shape often has no room of its own. Those sites are weaker "
         "than recorded today; the fix needs a walk whose room is the same for every member. Third try (23r): that "
         "redraw plus a walk stepping by the shape's 2^a 5^b 3^c (`_stride`, 40 strides: room for any shape) keeps "
         "red team 11 and 4 (with a roomy group: 26 has none below in two digits) and fixes these, but makes "
         "multiples of 3 strong: red team 9's R9-8 table bet then wins 1.0 against 0.25 on 429, 201, 308, 30522, "
         "44100, 366, C(20,10), fib(20), and red team 8's 38 keeps 0.60 (its 22 and 26 lack room)")


@pytest.mark.xfail(strict=True, reason=XFAIL)
@pytest.mark.parametrize("value", [83, 983])
def test_r23l_1_a_member_without_room_for_its_own_group_is_not_struck(value):
    """R23l-1: a member of a shaped group that would itself have no room for K values of its shape on a side
    (the end of its length's run) could not have been the real one: the forger strikes it."""
    won, recorded, kept = _room_bet(value)
    assert kept > 0
    assert won <= recorded + 0.05, (value, won, recorded)


def test_r23l_1_control_a_value_in_the_middle_of_its_run():
    """Control: 41 (every member has room both ways): the forger strikes nothing and wins at the recorded odds."""
    won, recorded, kept = _room_bet(41)
    assert kept > 0 and abs(won - 1 / (twins.K + 1)) < 0.01 and recorded == pytest.approx(1 / (twins.K + 1))


@pytest.mark.parametrize(("value", "others", "odds"), [
    pytest.param(83, ("89", "91", "97"), 1.0, marks=pytest.mark.xfail(strict=True, reason=XFAIL)),
    (43, ("41", "47", "49"), 0.25)])
def test_r23l_1_the_guard_counts_a_group_recorded_before_as_no_guard(value, others, odds):
    """R23l-1, the guard: a group validation recorded before the fix (83 among 89, 91 and 97, none of which had
    room for the group) is no guard; a group every member could have been drawn around still is one in four."""
    task = _task()
    task.twins = [Twin(test=GRADED[0], site=0, value=v) for v in others]
    assert guard.test_odds(task, {FILE: _source(value)}, {}, "") == {GRADED[0]: odds}
