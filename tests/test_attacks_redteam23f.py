"""Red team 23f: the blind review's verdicts (`sweserve tasks review record`, dataset/readiness.py).

- R23f-1 (a crash): a results line with a naive `at` ("2026-12-04T00:00:00", no zone) beside the aware times
  `now()` stamps: readiness sorted the reviews by `at` and raised TypeError (naive vs aware), a traceback from
  `tasks review record`, and from every later `assess` of a task.json that held it.
- R23f-2 (a bad task kept ready): one reviewer spelt twice ("Alice", "alice ", "ALICE") counted as two votes, so
  one person outvoted a BAD; and the same reviewer twice in one file was "2 of 2 GOOD" in the record's line.
- R23f-3 (a date that did not happen): a verdict dated in the future was recorded as is, and being the
  reviewer's "latest" it outlived every later verdict of theirs that carried a true date.
- R23f-4 (a verdict for another task): the results line's "task" was joined to the tasks folder unchecked, so
  "../elsewhere/o__r-1" wrote a review into a task outside `--tasks`, and a review whose `task` names another
  task counted in the task that held it.
"""

import json
from datetime import datetime, timedelta, timezone

import pytest

from sweserve.dataset import screening
from sweserve.dataset.readiness import assess, instruction_digest
from sweserve.dataset.taskstore import load_task, save_bundle
from sweserve.errors import SweserveError
from sweserve.models import Review, TaskBundle
from tests.test_readiness import task

GOOD = dict(sufficient=2, leak=False, fair_tests=True, family_ok=True, verdict="GOOD", reason="clear")
BAD = dict(sufficient=1, leak=False, fair_tests=False, family_ok=True, verdict="BAD", reason="pins a name")


def _store(root, n=1):
    tasks = root / "tasks"
    for i in range(1, n + 1):
        t = task(i)
        t.validation.forge_odds_instruction = instruction_digest(f"# Fix pages {i}\n")
        t.readiness = assess(t)
        save_bundle(tasks, TaskBundle(task=t, instruction=f"# Fix pages {i}\n",
                                      oracle_patch="diff --git a/pool.py b/pool.py\n+FIX\n",
                                      tests_patch="diff --git a/t.py b/t.py\n+def test_pages(): ...\n"))
    assert load_task(tasks / "o__r-1").ready
    return tasks


def _lines(path, *rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_r23f_1_a_naive_date_in_a_verdict_does_not_crash_readiness(tmp_path):
    tasks = _store(tmp_path)
    earlier = _lines(tmp_path / "a.jsonl", {"task": "o__r-1", "reviewer": "bob", **BAD})
    screening.record(tasks, screening.read_verdicts(earlier), write=True)  # stamped now(), aware
    naive = _lines(tmp_path / "b.jsonl", {"task": "o__r-1", "reviewer": "carol", "at": "2026-12-04T00:00:00", **GOOD})
    out = screening.record(tasks, screening.read_verdicts(naive), write=True)
    assert out["o__r-1"] == (False, "1 of 2 GOOD")  # a tie drops it
    t = load_task(tasks / "o__r-1")
    assert all(r.at.tzinfo is not None for r in t.reviews)
    assert not assess(t).ready  # and a task.json that holds it assesses again


def test_r23f_2_one_reviewer_spelt_twice_is_one_vote(tmp_path):
    tasks = _store(tmp_path)
    rows = _lines(tmp_path / "r.jsonl", {"task": "o__r-1", "reviewer": "Bob", **BAD},
                  {"task": "o__r-1", "reviewer": "Alice", **GOOD},
                  {"task": "o__r-1", "reviewer": "alice ", **GOOD},
                  {"task": "o__r-1", "reviewer": "ALICE", **GOOD})
    out = screening.record(tasks, screening.read_verdicts(rows), write=True)
    assert out["o__r-1"] == (False, "1 of 2 GOOD")
    assert not load_task(tasks / "o__r-1").ready
    assert len(load_task(tasks / "o__r-1").reviews) == 2  # Bob and Alice, her last line


def test_r23f_2_control_two_reviewers_outvote_one(tmp_path):
    tasks = _store(tmp_path)
    rows = _lines(tmp_path / "r.jsonl", {"task": "o__r-1", "reviewer": "Bob", **BAD},
                  {"task": "o__r-1", "reviewer": "Alice", **GOOD},
                  {"task": "o__r-1", "reviewer": "Carol", **GOOD})
    assert screening.record(tasks, screening.read_verdicts(rows), write=True)["o__r-1"] == (True, "2 of 3 GOOD")


def test_r23f_3_a_verdict_dated_in_the_future_is_refused(tmp_path):
    tasks = _store(tmp_path)
    future = (datetime.now(timezone.utc) + timedelta(days=365)).isoformat()
    rows = _lines(tmp_path / "r.jsonl", {"task": "o__r-1", "reviewer": "alice", "at": future, **GOOD})
    with pytest.raises(SweserveError, match="line 1.*future"):
        screening.read_verdicts(rows)
    # an old verdict keeps its date: a reviewer's later mind still wins
    old = _lines(tmp_path / "o.jsonl", {"task": "o__r-1", "reviewer": "alice", "at": "2026-01-02T00:00:00Z", **BAD},
                 {"task": "o__r-1", "reviewer": "alice", "at": "2026-01-01T00:00:00Z", **GOOD})
    assert screening.record(tasks, screening.read_verdicts(old), write=False)["o__r-1"][0] is False


def test_r23f_4_a_verdict_cannot_name_a_task_outside_the_folder(tmp_path):
    tasks = _store(tmp_path / "mine")
    elsewhere = _store(tmp_path / "elsewhere")
    rows = _lines(tmp_path / "r.jsonl", {"task": "../../elsewhere/tasks/o__r-1", "reviewer": "a", **BAD})
    with pytest.raises(SweserveError):
        screening.record(tasks, screening.read_verdicts(rows), write=True)
    assert not load_task(elsewhere / "o__r-1").reviews and load_task(elsewhere / "o__r-1").ready


def test_r23f_4_a_review_of_another_task_does_not_count():
    t = task(1, reviews=[Review(task="o__r-1", reviewer="bob", **BAD),
                         Review(task="o__r-2", reviewer="alice", **GOOD),
                         Review(task="o__r-2", reviewer="carol", **GOOD)])
    assert not assess(t).ready


def test_r23f_5_the_review_page_fetches_nothing_from_outside():
    """R23f-5 (a leak from the reviewer's browser): a statement's markdown image (`![](https://…/beacon.png)`, from
    the PR text it was mined from) was rendered as <img src="https://…">, so opening the review page fetched from
    any host the statement named, telling it who reviewed which task and when. The page allows no fetch at all."""
    import re

    page = review_page("# Fix pages\n\n![diagram](https://collector.example/beacon.png)\n")
    assert "diagram" in page  # the statement is still shown
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None, "no content security policy: the page may fetch from anywhere"
    rules = dict((d.split() + [""])[:2] for d in csp.group(1).split(";") if d.strip())
    assert rules.get("default-src") == "'none'" and not re.search(r"https?:|\*", csp.group(1))
    assert page.index(csp.group(0)) < page.index("collector.example")  # before anything it governs


def review_page(instruction: str) -> str:
    """The review page of a failed human trial of a task whose statement is `instruction`."""
    from sweserve.models import AgentRun, RunResult, TestResults
    from sweserve.reporting.review import review_html

    t = task(1)
    bundle = TaskBundle(task=t, instruction=instruction, oracle_patch="diff --git a/p.py b/p.py\n+FIX\n",
                        tests_patch="diff --git a/t.py b/t.py\n+x\n")
    at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    result = RunResult(run_id="r1", task_id=t.task_id, family=t.family, agent="human-jane", status="failed",
                       model_patch="", tests=TestResults(fail_to_pass={x: "failed" for x in t.FAIL_TO_PASS}),
                       agent_run=AgentRun(agent="human-jane", candidate="jane", wall_s=60.0),
                       started_at=at, finished_at=at + timedelta(seconds=60), duration_s=61)
    return review_html(bundle, result)
