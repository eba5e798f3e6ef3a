r"""An eleventh round of attacks on the newest defences: the repository prior (`twins.repository_priors`, read by
validation's draws through `unbalanced` and by the guard through `_set_odds`).

Each test asserts the defended behaviour: it FAILS when the attack wins. Plans are drawn with fixed seeds. Forge
odds are measured as red teams 8 and 9 do (`_bet_among`: on validation's own draws, `grading_plan(candidates=True)`,
the kept twins, against the guard's mean recorded odds `guard.forge_odds(guard.test_odds(...))`).

- R11-6 WIN (forge odds): the repository prior was three sets, the numbers any file writes, those the test files
  write, and those the test files beside the hidden one write. A member inside a set where the real value is
  inside says nothing more, so validation balanced its draws on membership alone. But a value a test checks is
  often a constant the code writes in several places (a default, a limit), while its neighbours sit once in a
  table. Betting on the member most files write won 1.0 against recorded odds of 0.25 (the real value in 5 more
  files than a table of its neighbours; 7 files against 6 as well, so bands of counts do not hold), and so did
  betting on the member the module under test writes, with every member written by as many files, and betting
  on the member one file writes most often (a table of neighbours and the real value as a constant five times).
  Fix (a mechanism, `twins.Written`): every file is a set a forger may bet on, and so is every count of files;
  the prior that closes all of them at once is the values written by exactly the files that write the real one
  (none, for a value no file writes). Each file's numbers written at least k times are a file of their own
  (`guard.REPEAT`, k in `twins.REPEATS`: exact up to 8, then bands). Every member shares the real value's set
  of files, or the site is weak. Each case also shows the bet winning with `Written` left out.
  `test_a_bet_on_which_files_write_a_member_does_not_beat_the_recorded_odds`; the control, members written by
  the same files keep a strong site: `test_members_written_by_the_same_files_keep_a_strong_site`.
  Left: counts past 8 are read in bands (a value written 13 times against neighbours written 12), and the
  context a number is written in (beside a word like `limit`) is no prior the guard reads.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from unittest import mock

import pytest

from sweserve.evaluation import guard, twins
from tests.test_attacks_redteam8 import CONVERT, _bet_among
from tests.test_attacks_twins import FILE

VALUE = 1317  # a strong site without a repository: not round, room for its shape on each side


def _rows(skip: int | None = None) -> str:
    """A lookup table (a fixture's rows) writing every value around VALUE once (but `skip`)."""
    return "ROWS = [" + ", ".join(str(v) for v in range(VALUE - 150, VALUE + 150) if v != skip) + "]\n"


def _tree(texts: dict[str, str]) -> tuple[dict[str, str], dict[str, frozenset[Decimal]]]:
    """The files, and the repository's numbers as `guard.repository_numbers` records them (`guard.entries`)."""
    return texts, {k: v for path, text in texts.items() for k, v in guard.entries(path, text).items()}


def _most_written(texts: dict[str, str]):
    """The forger's bet: the members the most files write (a count it reads from the tree)."""
    counts = Counter(n for text in texts.values() for n in twins.file_numbers(text))
    return lambda v: counts.get(v, 0) == max(counts.values())


def _most_often(texts: dict[str, str]):
    """The forger's bet: the members written the most times, over every file."""
    counts: Counter[Decimal] = sum((twins.file_counts(text) for text in texts.values()), Counter())
    return lambda v: counts.get(v, 0) == max(counts.values())


def _written_by(path: str):
    return lambda texts: lambda v: v in twins.file_numbers(texts[path])


LIMIT = f"LIMIT = {VALUE}\n"
REPOSITORIES = {
    # the real value in five more files than its neighbours' table
    "five-more-files": ({"pkg/table.py": _rows(), **{f"pkg/m{i}.py": LIMIT for i in range(5)}}, _most_written),
    # seven files against six: within any band of counts
    "one-more-file": ({**{f"pkg/table{i}.py": _rows() for i in range(6)}, "pkg/limits.py": LIMIT}, _most_written),
    # as many files each, but one of them is the module under test
    "the-module-under-test": ({"pkg/table.py": _rows(), "data/rows.py": _rows(skip=VALUE), "pkg/thing.py": LIMIT},
                              _written_by("pkg/thing.py")),
    # one file writes them all, the real value five times more
    "more-often-in-one-file": ({"pkg/table.py": _rows() + LIMIT * 5}, _most_often),
}


@pytest.mark.parametrize("case", sorted(REPOSITORIES))
def test_a_bet_on_which_files_write_a_member_does_not_beat_the_recorded_odds(case):
    texts, repository = _tree(REPOSITORIES[case][0])
    bet = REPOSITORIES[case][1](texts)
    source = CONVERT.replace("VALUE", str(VALUE))
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"], bet, 16,
                               repository=repository)
    assert won <= recorded + 0.1, (won, recorded)
    # without the defence: the members share the repository's three sets, and the bet wins against 0.25
    with mock.patch.object(twins.Written, "same", lambda self, value: frozenset(twins._window(value))):
        won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"], bet,
                                   16, repository=repository)
    assert won > recorded + 0.5, (won, recorded)


@pytest.mark.parametrize("copies", [1, 3])
def test_members_written_by_the_same_files_keep_a_strong_site(copies):
    """The control: where every member is written by exactly the files that write the real one (the same table
    rows), the prior says nothing, the site stays strong (recorded 1/4) and the bet on counts is at chance."""
    texts, repository = _tree({f"pkg/table{i}.py": _rows() for i in range(copies)})
    source = CONVERT.replace("VALUE", str(VALUE))
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"],
                               _most_often(texts), 16, repository=repository)
    assert recorded == pytest.approx(0.25) and won <= recorded + 0.1, (won, recorded)
