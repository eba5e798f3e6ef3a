"""Red team 23h: the review record and the review page, after round 23f.

- R23h-1 (a page that shows other words than the candidate read): the review page rendered the statement without
  spelling bidi controls and invisible characters, as every other text on the page and the markdown review do
  (R15b-2): "\u202e" reordered the reviewer's view of the statement, a zero-width space hid where a name breaks.
- R23h-2 (text hidden from the reviewer): the review page deleted every `<!-- ... -->` of a statement, to drop
  sweserve's own interface markers; a comment the candidate read in instruction.md (a hint, the fix's name) was
  not on the page the hiring team judged the candidate by.
- R23h-3 (one person, two votes): `Review.who` folded case and spaces but kept zero-width and other format
  characters, so "Alice" and "Al\u200bice" (a name pasted from a chat) were two reviewers outvoting a BAD.
- R23h-4 (a lost verdict): recording a second results file replaced a reviewer's verdict whatever its date, so a
  stale file recorded late (their GOOD of January 1st) undid the BAD they wrote on January 2nd, though within one
  file the later date wins (R23f-3).
- R23h-5 (a crash): a results file that is not UTF-8 raised UnicodeDecodeError, a traceback from
  `tasks review record`, not the clear error a bad line gets.
- R23h-6 (commands run one by one, recorded as one): a paste's start typed (ESC [200~) and then ^C. The terminal
  turns ^C into SIGINT whatever the shell reads, and bash drops the paste and its line (measured, bash 5: `echo
  RAN` typed after it ran at its own Enter); the record, waiting for the paste's end that never came, made every
  later command one entry, started at the paste.
- R23h-7 (a command off the list): an entry past 64 Ki characters kept its first 64 Ki and dropped the rest, so
  70 000 characters typed, ^C (bash drops them) and `cat answer-key.txt` Enter listed only the x's: the command
  that ran was "not shown here".
- R23h-8 (a crash of the report): the shell history the candidate writes may stamp a command "#99999999999999"
  (18 digits pass `parse_history`); with the history flagged (shrink it: `transcript_tampered`), the review page
  and `sweserve review` turned the stamp into a date, year 3170843: ValueError, and the board, which writes every
  reviewer page, failed for every candidate on it.
- R23h-9 (open, xfail): a paste's start typed to a program that is not reading a line with readline (`cat
  >/dev/null`, Enter, ESC [200~, ^D ^D): cat takes the marker and exits, and bash runs each later command at its
  own Enter (measured, bash 5); the record, waiting for a paste end, lists every later command as one entry from
  the marker's time, and with a flood before and after them, in its unshown middle (R23h-7 keeps start and end).
"""

import json
from datetime import datetime, timedelta, timezone

import pytest
from test_attacks_redteam23f import BAD, GOOD, _lines, _store, review_page
from test_readiness import task

from sweserve.dataset import screening
from sweserve.dataset.interface import CLOSE_MARK, OPEN_MARK
from sweserve.dataset.taskstore import load_task
from sweserve.errors import SweserveError
from sweserve.models import AgentRun, Review, RunResult, TaskBundle, TestResults
from sweserve.reporting.review import review_html


def _page(instruction: str) -> str:
    page = review_page(instruction)
    return page[page.index('id="instruction"'):page.index("<h2>Hidden tests")]


def test_r23h_1_the_statement_on_the_review_page_spells_invisible_characters():
    shown = _page("# Fix pages\n\nCall `free_\u200bpages` when \u202eoverflow\u202c happens.\n")
    assert "\u202e" not in shown and "\u200b" not in shown
    assert "&lt;U+202E&gt;" in shown and "&lt;U+200B&gt;" in shown
    assert "free_" in shown and "overflow" in shown


def test_r23h_2_a_comment_in_the_statement_is_on_the_review_page():
    shown = _page("# Fix pages\n\n<!-- hint: name it reclaim_pages -->\nFree pages on overflow.\n")
    assert "reclaim_pages" in shown  # the candidate read it: so does the reviewer


def test_r23h_2_control_sweserve_markers_are_not_shown():
    shown = _page(f"# Fix pages\n\nFree pages.\n\n{OPEN_MARK}\n## New interfaces\n\n- `reclaim()`\n{CLOSE_MARK}\n")
    assert "sweserve:interface" not in shown and "New interfaces" in shown and "reclaim()" in shown


@pytest.mark.parametrize("spelt", ["Al\u200bice", "Alice\u2060", "\ufeffAlice", "Ali\u00adce", "A\u200dlice"])
def test_r23h_3_one_reviewer_spelt_with_invisible_characters_is_one_vote(tmp_path, spelt):
    assert Review(task="o__r-1", reviewer=spelt, **GOOD).who == "alice"
    tasks = _store(tmp_path)
    rows = _lines(tmp_path / "r.jsonl", {"task": "o__r-1", "reviewer": "Bob", **BAD},
                  {"task": "o__r-1", "reviewer": "Alice", **GOOD},
                  {"task": "o__r-1", "reviewer": spelt, **GOOD})
    assert screening.record(tasks, screening.read_verdicts(rows), write=True)["o__r-1"] == (False, "1 of 2 GOOD")


def test_r23h_3_control_a_name_of_only_invisible_characters_is_no_name():
    with pytest.raises(ValueError):
        Review(task="o__r-1", reviewer="\u200b\u200d", **GOOD)


def test_r23h_4_a_stale_results_file_recorded_late_does_not_undo_a_later_verdict(tmp_path):
    tasks = _store(tmp_path)
    new = _lines(tmp_path / "new.jsonl", {"task": "o__r-1", "reviewer": "alice", "at": "2026-01-02T00:00:00Z", **BAD})
    old = _lines(tmp_path / "old.jsonl", {"task": "o__r-1", "reviewer": "alice", "at": "2026-01-01T00:00:00Z", **GOOD})
    screening.record(tasks, screening.read_verdicts(new), write=True)
    out = screening.record(tasks, screening.read_verdicts(old), write=True)
    assert out["o__r-1"] == (False, "0 of 1 GOOD")
    (kept,) = load_task(tasks / "o__r-1").reviews
    assert kept.verdict == "BAD"


def test_r23h_4_control_a_later_file_with_a_later_date_replaces(tmp_path):
    tasks = _store(tmp_path)
    old = _lines(tmp_path / "old.jsonl", {"task": "o__r-1", "reviewer": "alice", "at": "2026-01-01T00:00:00Z", **BAD})
    new = _lines(tmp_path / "new.jsonl", {"task": "o__r-1", "reviewer": "Alice", **GOOD})  # stamped now
    screening.record(tasks, screening.read_verdicts(old), write=True)
    assert screening.record(tasks, screening.read_verdicts(new), write=True)["o__r-1"] == (True, "1 of 1 GOOD")
    assert len(load_task(tasks / "o__r-1").reviews) == 1


def test_r23h_5_a_results_file_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "r.jsonl"
    line = json.dumps({"task": "o__r-1", "reviewer": "b\xe9a", **GOOD}, ensure_ascii=False)
    path.write_bytes(line.encode("latin-1") + b"\n")
    with pytest.raises(SweserveError, match="r.jsonl"):
        screening.read_verdicts(path)


def test_r23h_6_a_paste_cancelled_by_ctrl_c_does_not_swallow_the_commands_after_it():
    from sweserve.agents.terminal import typed_lines

    events = [(1.0, "i", "\x1b[200~echo PASTED\n"), (2.0, "i", "\x03"), (60.0, "i", "cat answer-key.txt\r"),
              (61.0, "i", "ls\r"), (62.0, "i", "pwd\r")]
    typed = typed_lines(events)
    assert typed[0][1].endswith("⟨^C⟩cat answer-key.txt")  # the ^C's line, as any (R14d-3: not guessed away)
    assert typed[1:] == [(61.0, "ls"), (62.0, "pwd")], typed


def test_r23h_6_control_a_paste_is_still_one_entry_run_at_the_enter_after_it():
    from sweserve.agents.terminal import typed_lines

    typed = typed_lines([(1.0, "i", "\x1b[200~cd /tmp\nls\n\x1b[201~"), (2.0, "i", "\r"), (3.0, "i", "pwd\r")])
    assert typed == [(1.0, "cd /tmp↵ls↵"), (3.0, "pwd")]
    # ^Z and ^\\ are signals an interactive bash ignores: its paste goes on past them (measured), so does the record's
    typed = typed_lines([(1.0, "i", "\x1b[200~cd /tmp\n\x1a\x1cls\n"), (2.0, "i", "\x1b[201~\r"), (3.0, "i", "pwd\r")])
    assert typed == [(1.0, "cd /tmp↵⟨^Z⟩⟨^\\⟩ls↵"), (3.0, "pwd")]


def test_r23h_7_the_end_of_a_long_entry_is_shown():
    from sweserve.agents.terminal import typed_lines

    (entry,) = typed_lines([(1.0, "i", "x" * 70_000), (2.0, "i", "\x03"), (60.0, "i", "cat answer-key.txt\r")])
    assert entry[1].endswith("⟨^C⟩cat answer-key.txt"), entry[1][-80:]
    assert "not shown here" in entry[1] and len(entry[1]) < 70_000


@pytest.mark.parametrize("stamp", ["99999999999999", "999999999999999999"])
def test_r23h_8_a_history_stamp_that_is_no_date_does_not_crash_the_review(stamp):
    from sweserve.agents.human import parse_history
    from sweserve.reporting.review import review_markdown

    history = parse_history(f"#{stamp}\ncat answer-key.txt\n#1700000000\nls\n")
    t = task(1)
    bundle = TaskBundle(task=t, instruction="# Fix pages\n", oracle_patch="diff --git a/p.py b/p.py\n+FIX\n",
                        tests_patch="diff --git a/t.py b/t.py\n+x\n")
    at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    run = AgentRun(agent="human-jane", candidate="jane", wall_s=60.0, flags=["transcript_tampered"],
                   transcript="\n".join(f"{s}\t{c}" for s, c in history), untyped_history=["cat answer-key.txt"])
    result = RunResult(run_id="r1", task_id=t.task_id, family=t.family, agent="human-jane", status="failed",
                       model_patch="", tests=TestResults(fail_to_pass={x: "failed" for x in t.FAIL_TO_PASS}),
                       agent_run=run, started_at=at, finished_at=at + timedelta(seconds=60), duration_s=61)
    for page in (review_html(bundle, result), review_markdown(bundle, result)):
        assert "cat answer-key.txt" in page and "22:13:20  ls" in page


@pytest.mark.xfail(strict=True, reason="R23h-9: the record cannot tell a paste the shell reads from one a program ate")
def test_r23h_9_a_paste_start_a_program_ate_does_not_join_the_commands_after_it():
    from sweserve.agents.terminal import typed_lines

    events = [(1.0, "i", "cat >/dev/null\r"), (2.0, "i", "\x1b[200~"), (3.0, "i", "\x04\x04"),
              (60.0, "i", "cat answer-key.txt\r"), (61.0, "i", "ls\r")]
    typed = typed_lines(events)
    assert (61.0, "ls") in typed, typed
