"""Red team round 22, engineer d: the grading core (in-process forgery, twins, the guard's forge odds).

R22d-1: a repository file the guard cannot tokenize writes no numbers. `twins._counts` read a Python file's
numbers from its tokens, and a file `tokenize` gives up on (an unterminated triple-quoted string, a bracket left
open at the end, a dedent to no indentation level: a Python 2 script, a template, a half-written example) was read
as writing nothing at all, though every byte of it is in the grade box. A forger greps the tree: the package's
`PAGES = 613` in such a file names the real member of a group the guard recorded at 1/4 (what a tokenizing file
writing the same line gives is 1.0: `test_guard`'s R6-3 case).
"""

from __future__ import annotations

import subprocess
from decimal import Decimal

import pytest
import test_guard as G

from sweserve.evaluation import guard, twins, validation
from sweserve.models import TestSpec, Twin

UNTOKENIZABLE = {
    # a docstring never closed
    "unterminated-string": 'PAGES = 613\nHELP = """pages of a pool\n',
    # a bracket left open at the end of the file
    "open-bracket": "PAGES = 613\nSIZES = (4, 8,\n",
    # a dedent to no level the file opened (tokenize's IndentationError)
    "bad-dedent": "def pages():\n        return 613\n    x = 1\n",
}


@pytest.mark.parametrize("case", sorted(UNTOKENIZABLE))
def test_r22d_1_a_file_that_does_not_tokenize_still_writes_its_numbers(case):
    text = UNTOKENIZABLE[case]
    assert Decimal(613) in twins.file_numbers(text)
    assert twins.file_counts(text)[Decimal(613)] >= 1
    assert Decimal(613) in guard.entries("pkg/legacy.py", text)["pkg/legacy.py"]


@pytest.mark.parametrize("case", sorted(UNTOKENIZABLE))
def test_r22d_1_the_guard_reads_the_real_value_in_a_file_that_does_not_tokenize(tmp_path, case):
    """The forger's bet on the member the package writes wins 1.0: the guard must record 1.0, not 1/4."""
    repo, bundle = G.clone_task(tmp_path, {"pkg/legacy.py": UNTOKENIZABLE[case]})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(1.0)


def test_r22d_1_control_a_file_that_does_not_tokenize_writing_every_member_says_nothing(tmp_path):
    repo, bundle = G.clone_task(tmp_path, {"pkg/legacy.py": 'X = [607, 611, 613, 617]\nHELP = """never closed\n'})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(0.25)


def test_r22d_1_control_a_tokenizing_file_reads_as_before():
    text = "PAGES = 613  # 41 pages\nNAME = 'pool_17'\n"
    assert twins.file_counts(text) == {Decimal(613): 1, Decimal(41): 1, Decimal(17): 1}


def _odds_at(path: str, values=("607", "611", "617")) -> float:
    """`test_guard`'s strong group (613 among 607, 611, 617) with its hidden file at `path`."""
    t = G.task([f"{path}::test_pages"], [Twin(test=f"{path}::test_pages", site=0, value=v) for v in values])
    t = t.model_copy(update={"test": TestSpec(files=[path])})
    return guard.test_odds(t, {path: G.TEXT}, {}, "")[f"{path}::test_pages"]


@pytest.mark.parametrize("path", ["test/test_pool_613.py", "test/pages613/test_pool.py"])
def test_r22d_2_the_hidden_files_path_naming_the_real_value_is_read(path):
    assert _odds_at(path) == pytest.approx(1.0)


@pytest.mark.parametrize("path", ["test/test_pool_613.py", "test/pages613/test_pool.py"])
def test_r22d_2_validation_keeps_no_strong_site_the_path_names(path):
    tree = twins.pyast.parse_module(G.TEXT)
    fn = next(n for n in tree.body if getattr(n, "name", "") == "test_pages")
    assert Decimal(613) in twins.other_files({path: G.TEXT}, path)
    assert not twins.strong_site(fn, 0, twins.other_files({path: G.TEXT}, path),
                                 twins.other_files({path: G.TEXT}, path))


@pytest.mark.parametrize("path", ["test/test_pool.py", "test/test_pool_2024.py", "test/v2/test_pool.py"])
def test_r22d_2_control_a_path_naming_no_member_keeps_the_group_strong(path):
    assert _odds_at(path) == pytest.approx(0.25)


def _clone_with(tmp_path, added: dict[str, str]):
    """`test_guard.clone_task`'s task (613 among 607, 611, 617), its tests.patch also adding `added`."""
    repo, bundle = G.clone_task(tmp_path)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    (repo / G.FILE).write_text(G.TEXT)
    for path, text in added.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        git("add", "-N", path)
    patch = git("diff")
    git("reset", "-q")
    git("checkout", "-q", ".")
    for path in added:
        (repo / path).unlink()
    return repo, bundle.model_copy(update={"tests_patch": patch})


@pytest.mark.parametrize("path", ["test/data/pages.json", "test/helpers.py", "test/conftest.py"])
def test_r22d_3_a_file_tests_patch_adds_beside_the_hidden_ones_is_read(tmp_path, path):
    text = '{"pool_4": {"pages": 613}}\n' if path.endswith(".json") else "POOL_4_PAGES = 613\n"
    repo, bundle = _clone_with(tmp_path, {path: text})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(1.0)


def test_r22d_3_validations_draw_reads_the_added_files_too(tmp_path):
    repo, bundle = _clone_with(tmp_path, {"test/data/pages.json": '{"pages": 613}\n'})
    repository = validation._repository(repo, bundle, guard.NumbersCache(), "none")
    assert repository is not None and Decimal(613) in repository["test/data/pages.json"]


def test_r22d_3_control_an_added_file_writing_every_member_says_nothing(tmp_path):
    repo, bundle = _clone_with(tmp_path, {"test/data/pages.json": "[607, 611, 613, 617]\n"})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(0.25)


class _Blobs:
    """The one method of `Git` that `NumbersCache.read` calls, over blobs held here."""

    def __init__(self, blobs: dict[str, bytes]):
        self.blobs = blobs

    def read_blob_bytes(self, blob: str) -> bytes | None:
        return self.blobs.get(blob)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_r22d_4_a_text_file_in_utf16_with_its_mark_is_read(encoding):
    data = (("\ufeff" if not encoding.endswith(("16", "32")) else "") + "613 pages\n").encode(encoding)
    numbers = guard.NumbersCache().numbers(_Blobs({"b": data}), "b", False)  # type: ignore[arg-type]
    assert numbers is not None and Decimal(613) in numbers


def test_r22d_4_control_a_binary_file_stays_unread():
    for data in (b"\x00613 pages\n", b"\x89PNG\r\n\x1a\n\x00\x00613", b"\xff\xfe\x00\xd8613"):
        assert guard.NumbersCache().numbers(_Blobs({"b": data}), "b", False) is None  # type: ignore[arg-type]
