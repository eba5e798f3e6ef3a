"""Red team round 22, engineer h: the guard's forge odds, again (what a forger reads in the grade box).

R22h-1: a file's counts past 8 are read in bands. `twins.repeated` recorded what a file writes at least k times
for k in `twins.REPEATS` (2 to 8, then 12, 16, 24, ...), so a value written 10 times and its neighbours written 9
times each fell in one band and `twins.Written` saw one set of files for all four. A forger betting on the
member a file writes most often (a constant repeated in a table of its neighbours) picks the real one every time
against recorded odds of 1/4 (left open by red team 11, R11-6: "counts past 8 are read in bands").
"""

from __future__ import annotations

from decimal import Decimal

import pytest
import test_guard as G

from sweserve.evaluation import guard, twins


def _table(counts: dict[int, int]) -> str:
    rows = [f"    {value}," for value, n in counts.items() for _ in range(n)]
    return "TABLE = [\n" + "\n".join(rows) + "\n]\n"


def _odds(tmp_path, counts: dict[int, int]) -> float:
    repo, bundle = G.clone_task(tmp_path, {"pkg/table.py": _table(counts)})
    return guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"]


@pytest.mark.parametrize("real, twin", [(10, 9), (13, 12), (20, 17)])
def test_r22h_1_a_bet_on_the_member_written_most_often_past_8_is_read(tmp_path, real, twin):
    """613 written `real` times, 607, 611 and 617 `twin` times each: the most written member is the real one."""
    assert _odds(tmp_path, {613: real, 607: twin, 611: twin, 617: twin}) == pytest.approx(1.0)


def test_r22h_1_exact_counts_are_recorded_past_8():
    counts = twins.file_counts(_table({613: 10, 607: 9}))
    sets = set(twins.repeated(counts).values())
    assert any(Decimal(613) in s and Decimal(607) not in s for s in sets)


def test_r22h_1_control_members_written_equally_often_keep_the_group_strong(tmp_path):
    assert _odds(tmp_path, {613: 10, 607: 10, 611: 10, 617: 10}) == pytest.approx(0.25)


def _with_history(tmp_path, past: dict[str, str], kept: dict[str, str]):
    """`test_guard.clone_task`'s task, its base moved on by two commits: one adding `past` and `kept`, one
    deleting `past` again (the image keeps base's ancestry: `git log --name-only` lists the deleted paths)."""
    import subprocess

    repo, bundle = G.clone_task(tmp_path)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    for path, text in {**past, **kept}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        git("add", path)
    git("commit", "-qm", "golden files")
    git("rm", "-q", *past)
    git("commit", "-qm", "tidy")
    base = git("rev-parse", "HEAD").strip()
    return repo, bundle.model_copy(update={"task": bundle.task.model_copy(update={"base_commit": base})})


def test_r22h_2_a_deleted_path_whose_blob_another_path_holds_is_read(tmp_path):
    """R22h-2: `Git.history_blobs` names each blob by the first path `rev-list --objects` shows it at, so an empty
    (or duplicate) golden file `test/golden/pages_613.txt`, deleted before base, goes by the name of an empty
    `pkg/__init__.py` at base and its path's digits are never read; the forger's `git log --name-only` lists it."""
    repo, bundle = _with_history(tmp_path, {"test/golden/pages_613.txt": ""}, {"pkg/__init__.py": ""})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(1.0)


def test_r22h_2_control_a_deleted_path_naming_no_member_says_nothing(tmp_path):
    repo, bundle = _with_history(tmp_path, {"test/golden/pages_2024.txt": ""}, {"pkg/__init__.py": ""})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(0.25)


@pytest.mark.xfail(strict=True, reason="R22h-3: a text file over MAX_TEXT_BYTES away from the hidden files is "
                                       "skipped, neither read nor counted unread")
def test_r22h_3_a_large_text_file_away_from_the_tests_is_read(tmp_path):
    """R22h-3: `repository_numbers` reads no blob over 1 MiB, and counts one as UNREAD only beside the hidden files;
    a dump elsewhere in the tree (`docs/expected.txt`) writing the real value is in the box, and `grep -r` reads it."""
    repo, bundle = G.clone_task(tmp_path, {"docs/expected.txt": "pool of 4: 613 pages\n" + "-" * (1 << 20)})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(1.0)


def test_r22h_3_control_a_small_text_file_away_from_the_tests_is_read(tmp_path):
    repo, bundle = G.clone_task(tmp_path, {"docs/expected.txt": "pool of 4: 613 pages\n"})
    assert guard.measure(repo, bundle)[1][f"{G.FILE}::test_pages"] == pytest.approx(1.0)
