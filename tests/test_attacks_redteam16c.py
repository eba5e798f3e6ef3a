"""Red team 16c: remote assessments for hiring teams (`sweserve assess`): the recorded session, the replay page,
the scorecard's numbers, and attempts a server restart hides.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. No Docker: the assessment pipeline runs against a local shell (as test_assess.py does).
"""

import csv
import json
import threading
import time

from test_assess import T0, QuietBox, bundle

from sweserve.assess.agent import CAST_FILE, BrowserAgent, Seat
from sweserve.assess.packs import choose_pack
from sweserve.assess.recorder import CastWriter, commands_from_cast
from sweserve.assess.scorecard import replay_page, write_scorecards
from sweserve.evaluation.evaluate import write_manifest
from sweserve.evaluation.results import ResultsWriter
from sweserve.evaluation.trial_folder import TrialFolder
from sweserve.models import RunResult

FLOOD_COMMANDS = 1_000_000  # "a⏎" a million times: 2 MB typed (the cast takes up to 64 MiB of input)


def result(agent, b, status, wall, attempt=1, trial_dir=None, run_id="r"):
    return RunResult.model_validate({
        "run_id": run_id, "task_id": b.task.task_id, "family": b.task.family, "agent": agent, "attempt": attempt,
        "status": status, "started_at": T0, "finished_at": T0, "duration_s": wall, "task_hash": b.content_hash(),
        "tests": {"fail_to_pass": {"t::a": "passed" if status == "resolved" else "failed"}},
        "agent_run": {"agent": agent, "wall_s": wall}, "trial_dir": trial_dir})


# ---- R16c-1: a flood of one-key commands is amplified into the result line and the server's memory

def test_r16c_1_a_flood_of_one_key_commands_leaves_the_transcript_bounded(tmp_path):
    """The candidate runs `stty -echo; cat >/dev/null` and sends "a⏎" a million times over the websocket (2 MB,
    within every input budget: the 1 MB key queue drains as cat reads, the cast keeps 64 MiB of input). At the
    submit, `BrowserAgent.solve` rebuilds every entry into `AgentRun.transcript` with no bound: one
    "<epoch>\\ta" line per Enter, 13 bytes for every 2 typed, into the RunResult line of the candidate's results
    file (read back by every later task of the session, the report and the scorecard). At the cast's 64 MiB
    input limit that is a ~290 MB transcript built from ~22 million entries, several GiB of the one server
    process that holds every candidate's session (see the report). The record the server keeps of keys
    (`keystrokes`, 256 KiB) and of the screen are bounded; this one must be too."""
    b = bundle(1)
    seat = Seat("mallory")
    agent = BrowserAgent("mallory", seat, 600, lambda _b: tmp_path / "trial" / CAST_FILE)
    box = QuietBox(tmp_path / "box")
    out = {}
    thread = threading.Thread(target=lambda: out.update(run=agent.solve(box, b)), daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while seat.terminal is None and time.monotonic() < end:
        time.sleep(0.05)
    term = seat.terminal
    term.write(b"stty -echo; cat >/dev/null\r")
    time.sleep(1.0)
    chunk = b"a\r" * 16384  # 32 KiB a websocket message (the server takes 64 KiB)
    for _ in range(2 * FLOOD_COMMANDS // len(chunk)):
        while term._pending > 512 * 1024:  # as fast as cat reads: nothing dropped
            time.sleep(0.005)
        term.write(chunk)
    while term._pending:
        time.sleep(0.05)
    seat.submitted.set()
    thread.join(120)
    run = out["run"]
    assert term.dropped == 0
    typed = len(run.transcript.encode())
    assert typed <= 2 * 2**20, f"a {typed / 2**20:.0f} MiB transcript from 2 MB typed"


def test_r16c_1_the_replay_page_of_a_one_key_flood_stays_near_the_cast_size(tmp_path):
    """The same flood on the reviewer's side: the replay page's player data is bounded at 4/3 of the cast
    (R15b-4), but the commands-typed table adds a 43-byte row for each 3 bytes of cast: a 64 MiB cast makes a
    ~1 GB page, which no browser opens, so the reviewer cannot see what was typed in the task where it
    mattered."""
    folder = tmp_path / "trial"
    cast = CastWriter(folder / CAST_FILE, 80, 24)
    cast.event("i", "stty -echo; cat >/dev/null\r")
    chunk = "a\r" * 16384
    for _ in range(2 * FLOOD_COMMANDS // len(chunk)):
        cast.event("i", chunk)
    cast.close()
    size = (folder / CAST_FILE).stat().st_size
    page = replay_page("mallory", result("human-mallory", bundle(1), "resolved", 60, trial_dir=str(folder)))
    assert len(page) <= 2 * size + 2**20, f"a {len(page) / 2**20:.0f} MiB page for a {size / 2**20:.0f} MiB cast"
    assert "more commands typed, not listed here" in page  # the list says that it stops, and where


def test_r16c_1_control_an_honest_session_lists_every_command(tmp_path):
    folder = tmp_path / "trial"
    cast = CastWriter(folder / CAST_FILE, 80, 24)
    for cmd in ("ls", "git diff", "pytest -x test/test_a.py"):
        cast.event("i", cmd + "\r")
    cast.close()
    page = replay_page("alice", result("human-alice", bundle(1), "resolved", 60, trial_dir=str(folder)))
    assert [c for _, c in commands_from_cast(folder / CAST_FILE)] == ["ls", "git diff", "pytest -x test/test_a.py"]
    assert "pytest -x test/test_a.py" in page


# ---- R16c-2: a session a restart ended is on no scorecard, and the retake reads as a first attempt

def test_r16c_2_a_session_cut_by_a_server_restart_is_named_on_the_retake(tmp_path):
    """The candidate starts, reads task 1 and works on it for most of its budget; then `assess serve` restarts
    (the README: sessions in progress end, their links stay spent): whether the hiring team restarted it or the
    candidate's own session took the process down (R16c-1). The trial never wrote a result: only its run's
    manifest (task 1, attempt 1) and the cast the server recorded. The hiring team sends a new link, and the
    second session's attempt is numbered 1 again (`Assessment.run` counts results only): the scorecard and the
    CSV say "no earlier attempt", the README's "name every earlier attempt" notwithstanding. The candidate got a
    full fresh clock on a task already read and worked out, and the reviewer reads a first attempt."""
    b1 = bundle(1)
    pack = choose_pack("p", [b1], 1, 3600)
    results_dir = tmp_path / "out" / "p"
    path = results_dir / "mallory.jsonl"
    agent = BrowserAgent("mallory", Seat("mallory"), 1800, lambda _b: None)  # only its name is used here
    # the first session, as a restart leaves it: the manifest of its run and the cast of the task, no result
    write_manifest(path, "run-first", agent, [b1], 1)
    first = TrialFolder.for_trial(path, "run-first", "human-mallory", b1.task.task_id, 1).path
    cast = CastWriter(first / CAST_FILE, 80, 24)
    cast.event("i", "cat /sweserve/instruction.md; vim python/sglang/srt/x.py\r")
    cast.close()
    # the retake, from a second link after the restart: attempt 1 again, resolved quickly
    write_manifest(path, "run-second", agent, [b1], 1)
    with ResultsWriter(path) as w:
        w.write(result("human-mallory", b1, "resolved", 300, attempt=1, run_id="run-second"))
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, [])
    mallory = next(r for r in csv.DictReader(cards.csv.open()) if r["candidate"] == "mallory")
    assert mallory["earlier_attempts"], f"the CSV names no earlier attempt: {mallory}"
    assert "retake" in cards.pages["mallory"].read_text()


def test_r16c_2_control_a_single_session_is_no_retake(tmp_path):
    b1 = bundle(1)
    pack = choose_pack("p", [b1], 1, 3600)
    results_dir = tmp_path / "out" / "p"
    path = results_dir / "alice.jsonl"
    write_manifest(path, "run-only", BrowserAgent("alice", Seat("alice"), 1800, lambda _b: None), [b1], 1)
    with ResultsWriter(path) as w:
        w.write(result("human-alice", b1, "resolved", 300, attempt=1, run_id="run-only"))
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, [])
    assert "retake" not in cards.pages["alice"].read_text()
    assert [r["earlier_attempts"] for r in csv.DictReader(cards.csv.open())] == [""]


# ---- R16c-3: the scorecard's ability leaves out a retake's earlier attempts

def ability_of(page: str) -> float:
    text = page.split("<span id=ability>ability ", 1)[1]
    return float(text.split(" ", 1)[0])


def test_r16c_3_a_retake_does_not_erase_the_failed_first_attempt_from_the_ability(tmp_path):
    """Two candidates, two tasks. Bob resolves both at the first try. Mallory fails task 1 (the first session,
    whose task she then reads up on), asks for a new link, and resolves both in the retake. The scorecard's Rasch
    fit takes only the last attempt of each (candidate, task) (`write_scorecards`: `mine = [attempts[-1] ...]`),
    so Mallory's ability is Bob's to the digit, while `report --difficulty` (every graded attempt, the README)
    counts her failure. The hiring team compares the ability numbers; the retake's note is beside a number that
    already forgave it."""
    b1, b2 = bundle(1), bundle(2, "serving-api")
    pack = choose_pack("p", [b1, b2], 2, 7200)
    results_dir = tmp_path / "out" / "p"
    for name, rows in (("bob", [result("human-bob", b1, "resolved", 900), result("human-bob", b2, "resolved", 900)]),
                       ("mallory", [result("human-mallory", b1, "failed", 1800),
                                    result("human-mallory", b1, "resolved", 600, attempt=2),
                                    result("human-mallory", b2, "resolved", 900)])):
        with ResultsWriter(results_dir / f"{name}.jsonl") as w:
            for r in rows:
                w.write(r)
    agents = [result("oracle", b, "resolved", 10) for b in (b1, b2)] + [result("null", b, "failed", 5) for b in (b1, b2)]
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, agents)
    bob, mallory = (ability_of(cards.pages[n].read_text()) for n in ("bob", "mallory"))
    assert mallory < bob, f"mallory {mallory:+.2f} vs bob {bob:+.2f}: the failed attempt left the fit"
    rows = {r.split(",")[0]: r.split(",") for r in cards.csv.read_text().splitlines()[1:]}
    assert float(rows["mallory"][12]) < float(rows["bob"][12])


def test_r16c_3_control_equal_records_get_equal_abilities(tmp_path):
    b1, b2 = bundle(1), bundle(2, "serving-api")
    pack = choose_pack("p", [b1, b2], 2, 7200)
    results_dir = tmp_path / "out" / "p"
    for name in ("bob", "carol"):
        with ResultsWriter(results_dir / f"{name}.jsonl") as w:
            w.write(result(f"human-{name}", b1, "resolved", 900))
            w.write(result(f"human-{name}", b2, "failed", 900))
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, [])
    assert abs(ability_of(cards.pages["bob"].read_text()) - ability_of(cards.pages["carol"].read_text())) < 1e-9
    assert json.dumps(sorted(cards.pages)) == '["bob", "carol"]'


# ---- R16c-4: one candidate's grade sandbox, slow to delete, holds every other candidate's session

def test_r16c_4_another_candidates_slow_sandbox_removal_does_not_hold_my_next_task(tmp_path):
    """Every assessment of `assess serve` shares one Docker host (`dataclasses.replace(ctx, ...)` copies the
    Context, not its host), and `run_evaluation` ends each task with `ctx.settle()`, which waits for every
    sandbox removal that host has started (`DockerHost.settle`), on a pool of two. Bob's submitted code runs in
    his grade sandbox (the hidden tests import it) and can leave a million files in its /tmp: dockerd then
    takes minutes to delete it, once per task. Meanwhile Alice's session, whose task has ended, sits on
    "grading…" and her next task does not start until Bob's removal is done, task after task. Her clock is not
    running, but her assessment hangs on another candidate's doing. A session must wait only for its own
    sandboxes. (The removal here is a box whose `remove` waits: what a slow `docker rm` is to the caller.)"""
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    from local_backend import local_context

    from sweserve.environment.docker_host import DockerHost
    from sweserve.evaluation.evaluate import run_evaluation

    ctx = local_context(tmp_path / "state")
    host = object.__new__(DockerHost)  # the real host's removal pool, settle and discard, without a daemon
    host._remover, host._removing, host._lock = ThreadPoolExecutor(2), set(), threading.Lock()
    ctx.host.discard, ctx.host.settle = host.discard, host.settle
    gone = threading.Event()

    class BobsGradeBox:
        def remove(self):
            gone.wait(30)

    ctx.host.discard(BobsGradeBox())  # Bob's task ended: his grade sandbox is being deleted
    alice = BrowserAgent("alice", Seat("alice"), 1800, lambda _b: None)
    done = threading.Event()
    threading.Thread(target=lambda: (run_evaluation(dataclasses.replace(ctx, results_run_id="alice-task-1"), [],
                                                    alice, tmp_path / "out" / "p" / "alice.jsonl", force=True),
                                     done.set()), daemon=True).start()
    try:
        assert done.wait(5), "Alice's task did not end while Bob's sandbox was being deleted"
    finally:
        gone.set()


def test_r16c_2_control_a_session_cut_before_its_terminal_started_is_no_attempt(tmp_path):
    """A restart while the task's image still built: the statement was never shown, so nothing to disclose."""
    b1 = bundle(1)
    pack = choose_pack("p", [b1], 1, 3600)
    results_dir = tmp_path / "out" / "p"
    path = results_dir / "alice.jsonl"
    agent = BrowserAgent("alice", Seat("alice"), 1800, lambda _b: None)
    write_manifest(path, "run-first", agent, [b1], 1)  # no cast: the terminal never started
    write_manifest(path, "run-second", agent, [b1], 1)
    with ResultsWriter(path) as w:
        w.write(result("human-alice", b1, "resolved", 300, attempt=1, run_id="run-second"))
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, [])
    assert "retake" not in cards.pages["alice"].read_text()


# ---- R16c-5: the same task in another pack is a retake no scorecard names

def test_r16c_5_an_attempt_of_the_task_in_another_pack_is_named(tmp_path):
    """Task 1 is in pack `backend-q3` and again in the pack the hiring team makes next (a second round, or the
    pack rebuilt under a new name after a task of it changed, which refuses the old pack's links). Mallory failed
    it in the first pack after 30 minutes with it; in the second she resolves it in 5. Attempts are counted per
    pack folder (`pack_attempts(results_dir)`, `Assessment.run` reads `<output>/<pack>/<candidate>.jsonl`), so
    the second pack's scorecard and CSV read a first try, and `begin` would even let both sessions run at once.
    The results of every pack sit side by side under `--output`: the other pack's attempt must be named."""
    b1, b2 = bundle(1), bundle(2, "serving-api")
    first, second = choose_pack("backend-q3", [b1, b2], 2, 7200), choose_pack("backend-q3b", [b1], 1, 3600)
    out = tmp_path / "out"
    with ResultsWriter(out / first.name / "mallory.jsonl") as w:
        w.write(result("human-mallory", b1, "failed", 1800, run_id="run-a"))
        w.write(result("human-mallory", b2, "failed", 1800, run_id="run-b"))
    with ResultsWriter(out / second.name / "mallory.jsonl") as w:
        w.write(result("human-mallory", b1, "resolved", 300, run_id="run-c"))
    cards = write_scorecards(second, out / second.name, tmp_path / "report", None, [])
    row = cards.csv.read_text().splitlines()[1]
    assert "backend-q3" in row.split(",", 14)[-1], f"no earlier attempt named: {row}"
    assert "retake" in cards.pages["mallory"].read_text()
