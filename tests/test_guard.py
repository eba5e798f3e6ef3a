"""Forge odds (evaluation/guard.py): how likely code in a module the tests import passes every FAIL_TO_PASS
test by guessing which planted member is real, from the recorded twins and the hidden files."""

import ast
import subprocess
from decimal import Decimal

import pytest

from sweserve.evaluation import guard, twins
from sweserve.models import Task, TaskBundle, TestSpec, Twin

FILE = "test/test_pool.py"
TEXT = '''from pool import Pool


def test_pages():
    assert Pool(4).pages() == 613


def test_small():
    assert Pool(1).pages() == 2


def test_none():
    assert Pool(0).owner is None


class TestPool:
    def test_cap(self):
        assert Pool(4).cap() == 347
'''


def task(f2p: list[str], twins: list[Twin], **kw) -> Task:
    return Task(task_id="o__r-1", repo="o/r", profile="sglang-demo", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(files=[FILE]), FAIL_TO_PASS=f2p, twins=twins, **kw)


def group(test: str, site: int, *values: str) -> list[Twin]:
    return [Twin(test=f"{FILE}::{test}", site=site, value=v) for v in values]


def test_a_strong_group_is_one_guess_in_its_members():
    t = task([f"{FILE}::test_pages"], group("test_pages", 0, "607", "611", "617"))
    assert guard.test_odds(t, {FILE: TEXT}, {}, "") == {f"{FILE}::test_pages": 0.25}


def test_a_group_whose_members_differ_in_shape_is_weak():
    """A group recorded before twins shared the real value's shape (red team 8, R8-1): 613 among 612 and 614
    (even) is the one odd member, so a bet on the odd one reads it; only a group of one shape is a guess."""
    for values, odds in [(("611", "612", "614"), 1.0), (("607", "611", "617"), 0.25), (("609", "611", "615"), 1.0)]:
        t = task([f"{FILE}::test_pages"], group("test_pages", 0, *values))
        assert guard.test_odds(t, {FILE: TEXT}, {}, "") == {f"{FILE}::test_pages": odds}, values


def test_a_test_without_twins_or_with_only_weak_ones_is_free():
    twinless = task([f"{FILE}::test_pages"], [])
    assert guard.test_odds(twinless, {FILE: TEXT}, {}, "") == {f"{FILE}::test_pages": 1.0}
    # the instruction writes the real value: a forger reads it, the group is weak
    t = task([f"{FILE}::test_pages"], group("test_pages", 0, "607", "611", "617"))
    assert guard.test_odds(t, {FILE: TEXT}, {}, "Pool(4) must report 613 pages.") == {f"{FILE}::test_pages": 1.0}
    # so does the base version of the same test
    base = {FILE: "def test_pages():\n    assert Pool(4).pages() == 613\n"}
    assert guard.test_odds(t, {FILE: TEXT}, base, "") == {f"{FILE}::test_pages": 1.0}
    # a small value whose group crosses zero: the sign prior reads it
    small = task([f"{FILE}::test_small"], group("test_small", 0, "-1", "0", "1"))
    assert guard.test_odds(small, {FILE: TEXT}, {}, "") == {f"{FILE}::test_small": 1.0}


def test_flip_and_raises_groups_are_weak():
    """Two readings a prior from the test's name, the instruction or the file can read: no bound below 1."""
    t = task([f"{FILE}::test_none"], group("test_none", 0, "flip 0"))
    assert guard.test_odds(t, {FILE: TEXT}, {}, "") == {f"{FILE}::test_none": 1.0}
    t = task([f"{FILE}::test_none"], group("test_none", 0, "raises 0 ValueError"))
    assert guard.test_odds(t, {FILE: TEXT}, {}, "") == {f"{FILE}::test_none": 1.0}


def test_the_task_odds_multiply_over_tests_and_parametrizations_are_one_test():
    twins = group("test_pages", 0, "607", "611", "617") + group("TestPool::test_cap", 0, "331", "341", "343")
    # the runner names tests from its rootdir (`pool/...` under `test/`): they still match the plan's ids
    t = task([f"{FILE}::test_pages[1]", f"{FILE}::test_pages[2]", "test_pool.py::TestPool::test_cap",
              f"{FILE}::test_none"], twins)
    per = guard.test_odds(t, {FILE: TEXT}, {}, "")
    assert per == {f"{FILE}::test_pages": 0.25, "test_pool.py::TestPool::test_cap": 0.25, f"{FILE}::test_none": 1.0}
    assert guard.forge_odds(per) == 0.0625


def clone_task(tmp_path, extra: dict[str, str] | None = None):
    """A real clone whose base writes `test_cap` with its value, and a task adding `test_pages`."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (repo / "test").mkdir()
    (repo / FILE).write_text("from pool import Pool\n\n\ndef test_cap():\n    assert Pool(4).cap() == 347\n")
    for path, text in (extra or {}).items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git("add", ".")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD").strip()
    (repo / FILE).write_text(TEXT)
    patch = git("diff")
    git("checkout", "-q", ".")
    (repo / "pool.py").write_text("class Pool:\n    pass\n")
    git("add", "-N", "pool.py")
    oracle = git("diff")
    (repo / "pool.py").unlink()
    git("reset", "-q")
    twins = group("test_pages", 0, "607", "611", "617") + group("test_cap", 0, "331", "341", "343")
    t = task([f"{FILE}::test_pages", f"{FILE}::test_cap"], twins).model_copy(update={"base_commit": base})
    return repo, TaskBundle(task=t, instruction="Count pages.", oracle_patch=oracle, tests_patch=patch)


def test_measure_reads_the_hidden_files_in_the_clone(tmp_path):
    """`measure` reads base + tests.patch and base in a real clone: a test the base version already writes
    with the same value is weak there."""
    repo, bundle = clone_task(tmp_path)
    odds, per = guard.measure(repo, bundle)
    assert per == {f"{FILE}::test_pages": 0.25, f"{FILE}::test_cap": 1.0} and odds == 0.25


@pytest.mark.parametrize("other, odds", [
    ({"test/test_aligned.py": "def test_aligned():\n    assert pages(104) == 613\n"}, 1.0),  # names the real one
    ({"test/test_aligned.py": "def test_aligned():\n    assert pages(96) == 617\n"}, 1 / 3),  # names a twin
    ({"tests/test_far.py": "X = [607, 611, 613, 617]\n"}, 0.25),  # writes every member: says nothing
    ({"pkg/notes.py": "PAGES = 613\n"}, 1.0),  # the package's own source (red team 6, R6-3)
    ({"docs/notes.md": "613 pages\n"}, 1.0),  # any text file (red team 7, R7-9)
    ({"docs/logo.png": "\x00613 pages\n"}, 1.0),  # binary: what `strings` reads there (red team 22j, R22j-1)
    ({"docs/logo.png": "\x00\x89PNG\r\n"}, 0.25),  # binary, writing no member
])
def test_measure_reads_what_the_repositorys_other_test_files_write(tmp_path, other, odds):
    """Red team 5's R8: every test file of the repository is in the box; one that writes the real member's
    value alone (or a twin's alone) tells a forger where to bet (`guard._set_odds`)."""
    repo, bundle = clone_task(tmp_path, other)
    assert guard.measure(repo, bundle)[1][f"{FILE}::test_pages"] == pytest.approx(odds)


def test_tasks_guard_measures_and_records_the_odds_without_a_container(tmp_path):
    """`sweserve tasks guard --write`: for tasks validated before the odds were measured, from their recorded
    twins and the clone; readiness follows the profile's bound."""
    import json
    import sys

    from sweserve.dataset.taskstore import load_task, save_bundle
    from sweserve.models import QualityRecord, SignalCheck, ValidationRecord

    repo, bundle = clone_task(tmp_path)
    bundle.task.family_confident = True
    bundle.task.validation = ValidationRecord(status="valid", runs=1, signals=[SignalCheck(name="cosmetic_oracle")],
                                              twin_orders=["first", "last"])  # groups kept from both orders
    bundle.task.quality = QualityRecord(statement_source="pr_description", statement_chars=300,
                                        interface_from="fail_to_pass")
    bundle.task.profile = "sglang"  # the default bound, 0.25
    save_bundle(tmp_path / "tasks", bundle)
    unguarded = bundle.model_copy(deep=True)
    unguarded.task.task_id, unguarded.task.twins = "o__r-2", []
    save_bundle(tmp_path / "tasks", unguarded)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "sweserve.cli", "tasks", "guard", "--tasks",
                               str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state"), *args],
                              capture_output=True, text=True)

    assert load_task(tmp_path / "tasks" / "o__r-1").validation.forge_odds is None
    proc = cli("--repo-path", str(repo), "--json", "--write")
    assert proc.returncode == 0, proc.stderr
    rows = {r["task_id"]: r for r in json.loads(proc.stdout)}
    assert rows["o__r-1"]["forge_odds"] == 0.25 and rows["o__r-1"]["strong"] == 1 and rows["o__r-1"]["ready"]
    assert rows["o__r-2"]["forge_odds"] == 1.0 and not rows["o__r-2"]["ready"]
    one, two = load_task(tmp_path / "tasks" / "o__r-1"), load_task(tmp_path / "tasks" / "o__r-2")
    assert one.validation.forge_odds == 0.25 and one.validation.max_forge_odds == 0.25 and one.ready
    assert not two.ready and [r.key for r in two.readiness.reasons] == ["unguarded"]
    bad = cli("--repo-path", str(tmp_path / "nope"))
    assert bad.returncode != 0 and "no such folder" in bad.stderr + bad.stdout and "Traceback" not in bad.stderr


MIXIN_TEXT = '''import unittest
from pool import Pool


class PoolChecks:
    def test_cap(self):
        assert Pool(4).cap() == 347


class TestSmall(PoolChecks, unittest.TestCase):
    pass


class TestLarge(PoolChecks, unittest.TestCase):
    pass
'''


def test_a_mixin_test_counts_the_group_grading_reads_in_each_class():
    """A mixin's test is planted once, with the group of the first class that records one; a class whose own
    recorded group differs reads none of those twins at grading, so its copy of the test is unguarded."""
    small, large = f"{FILE}::TestSmall::test_cap", f"{FILE}::TestLarge::test_cap"
    same = [Twin(test=t, site=0, value=v) for t in (small, large) for v in ("331", "341", "343")]
    assert guard.test_odds(task([small, large], same), {FILE: MIXIN_TEXT}, {}, "") == {small: 0.25, large: 0.25}
    other = [Twin(test=small, site=0, value=v) for v in ("331", "341", "343")] + \
        [Twin(test=large, site=0, value=v) for v in ("341", "343", "349")]
    assert guard.test_odds(task([small, large], other), {FILE: MIXIN_TEXT}, {}, "") == {small: 0.25, large: 1.0}


CPU = "def test_pages():\n    assert pages(100) == 13\n"


def _candidate_groups(repository: dict) -> list[frozenset]:
    """The candidate groups validation plants for CPU's one site over a few draws, as values."""
    out = []
    for seed in range(20):
        plan = twins.grading_plan(task([], []), {FILE: CPU}, seed=seed, candidates=True, repository=repository)
        twins_of = [Decimal(m.twin.value) for m in plan.members if m.kind == "twin"]
        out.append(frozenset([Decimal(13), *twins_of]) if twins_of else frozenset())
    return out


@pytest.mark.parametrize("numbers", [
    {8, 9, 10, 11, 12, 13, 15, 17, 18, 19, 20},  # 13 is written there: its twins are values written there too
    {12, 40, 100},  # 13 is not: no twin is a value written there
])
def test_validation_draws_twin_values_that_the_repositorys_test_files_do_not_split(numbers):
    """A forger reading the other test files learns nothing from a group all inside or all outside what they write:
    validation draws candidate values so (`twins.unbalanced`), and the guard then records 1/members."""
    repository = {"test/test_other.py": frozenset(Decimal(n) for n in numbers)}
    priors = twins.repository_priors(FILE, repository)
    for group in _candidate_groups(repository):
        assert len(group) == 4, group
        assert guard._set_odds(group, Decimal(13), priors) == 0.25, sorted(group)
    unbalanced = [g for g in _candidate_groups({}) if guard._set_odds(g, Decimal(13), priors) > 0.25]
    assert unbalanced  # drawn without the repository, some groups are split by it


def test_a_value_the_repository_writes_alone_around_it_leaves_no_strong_site():
    """13 written by another test file with none of its neighbours: no group of four can be all inside, so the
    site is weak (a fall-back group, recorded as no guard)."""
    fn = next(n for n in ast.parse(CPU).body if isinstance(n, ast.FunctionDef))
    repository = {"test/test_aligned.py": frozenset({Decimal(104), Decimal(13), Decimal(4)})}
    near = twins._near(twins.sites(fn), twins.unbalanced(13, twins.repository_priors(FILE, repository)), fn)
    assert twins.strong_sites(twins.sites(fn), near) == []


def test_the_numbers_cache_reads_each_blob_once_across_tasks(tmp_path, monkeypatch):
    """`tasks guard` and validation measure many tasks of one clone: a file unchanged between their base commits
    is read and scanned once (`NumbersCache`), and what each task gets is what a fresh read gives."""
    repo, bundle = clone_task(tmp_path, {"pkg/a.py": "A = 104\n", "pkg/b.py": "B = 96\n"})
    fresh = guard.repository_numbers(repo, bundle.task, [FILE], history="none")
    (repo / "pkg" / "b.py").write_text("B = 97\n")
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "next"], check=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    later = bundle.task.model_copy(update={"base_commit": head})
    read: list[str] = []
    real_read = guard.Git.read_blob_bytes
    monkeypatch.setattr(guard.Git, "read_blob_bytes", lambda self, blob: read.append(blob) or real_read(self, blob))
    cache = guard.NumbersCache()
    assert guard.repository_numbers(repo, bundle.task, [FILE], cache, "none") == fresh
    first = len(read)
    second = guard.repository_numbers(repo, later, [FILE], cache, "none")
    assert len(read) == first + 1  # only pkg/b.py changed
    assert second["pkg/b.py"] == frozenset({Decimal(97)}) and second["pkg/a.py"] == fresh["pkg/a.py"]
    # with the ancestry in the box, the old version counts too, and it is read from the cache
    assert guard.repository_numbers(repo, later, [FILE], cache)["pkg/b.py"] == frozenset({Decimal(96), Decimal(97)})
    assert len(read) == first + 1
    assert guard.measure(repo, bundle, cache=cache) == guard.measure(repo, bundle)


def test_a_blob_over_the_size_bound_is_never_read(tmp_path, monkeypatch):
    """`repository_numbers` leaves a file over MAX_TEXT_BYTES unread (its size comes from the tree listing):
    a data dump or a weights file costs no I/O."""
    repo, bundle = clone_task(tmp_path, {"pkg/small.py": "A = 613\n", "data/dump.json": "[" + "613, " * 40 + "0]\n"})
    monkeypatch.setattr(guard, "MAX_TEXT_BYTES", 100)
    read: list[str] = []
    real_read = guard.Git.read_blob_bytes
    monkeypatch.setattr(guard.Git, "read_blob_bytes", lambda self, blob: read.append(blob) or real_read(self, blob))
    numbers = guard.repository_numbers(repo, bundle.task, [FILE], history="none")
    assert "pkg/small.py" in numbers and "data/dump.json" not in numbers
    assert len(read) == len(numbers)
