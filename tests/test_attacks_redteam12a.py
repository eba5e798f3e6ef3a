"""Red team 12a: the remote assessment (`sweserve assess`) attacked by its candidate.

Each test asserts the defended behaviour: it FAILS at HEAD (d6f245d) while the attack wins. No Docker: real
servers on 127.0.0.1, a local bash on the server's pseudo-terminal standing in for the sandbox's shell (as
`test_assess.test_the_websocket_serves_only_its_own_session_and_resumes_it` does), and the pipeline replaced
where only the assessment's own bookkeeping is attacked.

- R12a-1 WIN (the record lies): `recorder.commands_from_cast` models the line editor as "append printable, pop
  on backspace, clear on ^U" and drops every other control key. bash's readline does more: ^A moves to the
  start of the line, and ^U then kills from the cursor back, i.e. nothing; ^Y yanks what ^U killed. Typed
  `cat answer-key.txt`, ^A, ^U, Enter: bash runs `cat answer-key.txt` (its output is on the screen) and the
  reviewer's "Commands typed" (and the `RunResult` transcript, built from the same function) shows an empty
  command. Likewise `echo typed-x`, ^U, ^Y, Enter runs `echo typed-x` and is recorded as ``. Any command can be
  kept out of the list a reviewer reads. (The replay itself plays the line as readline redraws it and its
  output: a reviewer who watches that moment sees it; the list and the transcript do not.) `sweserve session`
  would flag it through the shell's history (`history_disagrees`); the browser path never reads the history.
  Measured with a real bash 5.2 on the server's pty: the secret printed, the recorded commands `['', '', 'exit']`.
  `test_a_command_kept_by_readline_is_in_the_commands_typed`.
- R12a-2 WIN (ability inflated): the Rasch fit (`difficulty.GRADED`) counts resolved, failed, patch_failed and
  tampered; every `error` is dropped as "saying nothing of the task". But an error of kind `limit` is the
  candidate's own (`evaluate.OWN_ERRORS`; R11-4 kept "a disk limit or a submission too large" in the candidate's
  phase as `error`): a candidate stuck on a task writes 60 MB into /testbed before Submit (`head -c 60000000
  /dev/urandom > blob.bin`, `test_attacks_isolation.test_huge_submission_is_an_error_...` shows the pipeline
  makes that `error`/`limit`) and the failure vanishes from the fit. Measured: two candidates who each resolved
  one task and not the other, against an oracle and a null agent: the honest one -0.17 logits, the one who
  turned the failure into a limit error +0.91 (the CSV's `ability`, and the scorecard's standing against the
  agents and the other candidates). The task's row says `error`, which reads as the machinery's fault.
  `test_a_candidates_own_limit_error_counts_against_their_ability`.
- R12a-3 WIN (a retake hidden; needs the hiring team to issue a second link): the invite page tells a candidate
  whose session was interrupted to "ask the hiring team for a new link"; a second link for the same pack writes to the same `<pack>/<candidate>.jsonl`
  (attempt 2), and the scorecard (`pack_results`: the last attempt of each task) shows only the retake: its
  status, its time used, its replay; the first session (where the candidate read every task and worked out the
  fix) is on no page, and is not in the fit either. Measured through `AssessServer.begin` with the pipeline
  replaced: session 1 worked 1.5 s and failed, session 2 typed the fix and submitted: the scorecard says
  "Resolved 1 of 1", "0.0 of 30 min", no word of a first attempt.
  `test_a_second_session_on_the_same_pack_is_disclosed_on_the_scorecard`.
- R12a-4 WIN (one candidate freezes every other): the websocket handler writes the keys to the pty with a
  blocking `os.write` (`BrowserTerminal.write`) on the server's event loop. A candidate types
  `stty -icanon; exec sleep 12` (a program that does not read a raw terminal) and sends 1 MB of input: the pty's
  input queue fills, `os.write` blocks, and the whole server stops: another candidate's `/api/state` and terminal
  hang, and their clocks, on the server, keep running (at each deadline the work is submitted as it stands).
  Ending the attacker's shell does not free it: the pty's slave is closed, nobody will ever read the queue, and
  the write never returns; only a restart, which ends every session in progress (their links stay spent).
  Measured: the other candidate's `/api/state` timed out (3 s) while the flood was held and again after the
  attacker's shell was killed; a bare `BrowserTerminal.write` was still blocked 20 s after `stop()` returned.
  Through `docker exec -it` into a task image (a scratch run, not a test here): the write blocked after 256 KB
  (4 messages) and was still blocked 10 s after `docker kill` and `stop()`. A restart is what the hiring team
  must do, and it hands every candidate then in a session a new link: R12a-3's retake.
  `test_a_candidate_cannot_stall_another_candidates_session`.
- R12a-5 WIN (free reading time): `Assessment.run` sets `index` to the next task before `run_evaluation` builds
  its image and starts its sandbox; `/api/state` renders that task's instruction from then on, while `left_s` is
  None; the task's clock (`BrowserAgent.solve`'s deadline) starts only once the sandbox is up. The candidate
  reads the statement for as long as the image build and sandbox start take (first task and every next one).
  Measured with the pipeline's set-up standing in as a 3 s sleep: the instruction served for 3 s before the
  clock started. `test_the_instruction_is_not_shown_before_its_clock_starts`.
- R12a-6 WIN (the record cut on purpose): the cast stops keeping input once the file passes 2 x CAST_MAX_BYTES
  (128 MiB), counted in JSON characters: a control character typed is one byte sent and six kept (`\u0001`), so
  about 21 MiB sent (computed: some 340 websocket messages of 64 KB, into `stty -echo; cat > /dev/null`) ends
  the record;
  every command after it runs and is in no list: not in the replay's "Commands typed", not in the transcript
  (the `m` marker is written once, at the output cap, inside the cast only; the flood's lines show as empty
  commands, control characters being dropped). Measured with the cap scaled to 200 KB and a 512 KB flood: the
  command after the flood ran (its output on the screen), the list ends with the flood's empty lines and says
  nothing. `test_commands_typed_after_a_paste_flood_are_still_listed`.

Fixed since (each test here failed before its fix):
- R12a-1: `commands_from_cast` applies Backspace, ^U and ^W only while the cursor cannot have moved, ^Y yanks
  back what they cut, and shows every other control key (`⟨^A⟩`), and every edit after one, instead of dropping it.
- R12a-2: an error of the candidate's own (`errors.OWN_ERRORS`, a limit) is a 0 in the fit (`difficulty.response`).
- R12a-3: the scorecard and the CSV (`earlier_attempts`) name every earlier attempt of a task.
- R12a-4: the pty is non-blocking; keys go through a bounded queue (1 MB, then dropped with a cast marker) to
  a feeder thread; nothing the candidate's terminal does blocks the server's event loop.
- R12a-5: `/api/state` serves a task's title and statement only while its clock runs.
- R12a-6: typing past the recording limit writes a marker of its own, which ends the commands typed list.

Leads, not reproduced:
- An image not built yet: `ctx.image(inputs)` runs inside `run_evaluation` before the clock, so R12a-5's free
  time is minutes on a first build; not measured with Docker here.
- Two links for the same pack redeemed at once: both sessions read the same `max(attempt)` and both write
  attempt 1; `pack_results` keeps the last one written (`>=`), so the candidate chooses which counts. The
  second concurrent `run_evaluation` may instead refuse the results file (`ResultsWriter`'s non-blocking lock,
  "another sweserve run is writing this results file"), ending that session in `error`.
- In canonical mode the pty drops input past its 4 KB line buffer instead of blocking: R12a-4 needs a raw-mode
  reader that does not read (`stty -icanon`, a curses program stopped with ^Z is enough to try).
- The replay page embeds the whole cast (up to 64 MiB of output and 128 MiB of input, escaped again by
  `json.dumps`: 200+ MB of HTML) in one script: a candidate can likely make the replay too big for a reviewer's
  browser to open; not tried in a browser.
- Other `error`s a candidate may cause from inside (a tree the pipeline cannot copy or diff) would leave the fit
  as R12a-2's do; none tried.
- `commands_from_cast` swallows the character after an ESC that is not `[` or `O` (ESC Enter, Alt-keys): an
  Enter after ESC ends no line in the record.

Looked at, no finding: invite tokens (32 random bytes, stored hashed, redeemed once under a lock, GET never
spends them); the session cookie (random, hashed, HttpOnly, SameSite=Strict) and fixation (a fresh key on each
redeem); the websocket's Origin check (absent Origin needs the cookie anyway; `null` and other hosts refused);
CSRF on /api/submit (SameSite=Strict); `/vendor/{name}` (a fixed map, no traversal); the cast's JSON (control
characters and U+2028 escaped, so `read_cast`'s `splitlines` cannot split an event; `<` escaped in the replay's
script); escaping of the scorecard (names and pack names are pattern-restricted; statuses from a Literal); the
deadline (read, not tested: the box is killed from the host before the tree is copied; a Submit before `take`
sets a stale event, so it cannot submit the next task early).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from test_assess import T0, Ctx, QuietBox, bundle, free_port

from sweserve.assess.recorder import BrowserTerminal, commands_from_cast
from sweserve.models import RunResult


def _serve(app):
    import uvicorn

    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait = time.monotonic() + 10
    while not uv.started and time.monotonic() < wait:
        time.sleep(0.05)
    return uv, thread, port


# ---- R12a-1

def bash_beside_a_key(tmp_path):
    """A real bash on the server's terminal, a secret file beside it, and what the terminal shows."""
    key = tmp_path / "answer-key.txt"
    key.write_text("SECRET-CONTENT-42\n")
    cast = tmp_path / "c.cast"
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], cast).start()
    shown: list[bytes] = []
    term.subscribe(shown.append)
    return key, cast, term, shown


def exit_and_read(term, shown, cast):
    """`exit` typed, the terminal stopped: what it showed, and the commands typed as the reviewer reads them."""
    try:
        time.sleep(0.5)
        term.write(b"exit\r")
        term.exited.wait(10)
    finally:
        term.stop()
    return b"".join(shown).decode(errors="replace"), [c for _, c in commands_from_cast(cast)]


def two_candidates(tmp_path, server):
    """mallory and bob, each in a running assessment of one task on `server`, with a bash terminal each."""
    from sweserve.assess.agent import Seat
    from sweserve.assess.invites import Invite
    from sweserve.assess.packs import choose_pack
    from sweserve.assess.server import Assessment

    pack = choose_pack("p", [bundle(1)], 1, 3600)
    terms = {}
    for name in ("mallory", "bob"):
        invite = Invite(invite_id=name, candidate=name, pack="p.yaml", pack_version=pack.version,
                        token_sha256="0" * 64, created_at=T0, expires_at=T0)
        seat = Seat(name)
        a = Assessment(invite, pack, [bundle(1)], tmp_path / f"{name}.jsonl", seat, status="running")
        server.sessions[hashlib.sha256(f"{name}-key".encode()).hexdigest()] = a
        terms[name] = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / f"{name}.cast").start()
        seat.take("o__r-1", terms[name], time.time() + 600)
    return terms


def test_a_command_kept_by_readline_is_in_the_commands_typed(tmp_path):
    key, cast, term, shown = bash_beside_a_key(tmp_path)
    try:
        time.sleep(0.5)
        for keys in (f"cat {key}".encode(), b"\x01", b"\x15", b"\r",  # ^A then ^U: readline kills nothing
                     b"echo typed-x", b"\x15", b"\x19", b"\r"):  # ^U kills, ^Y yanks it back
            term.write(keys)
            time.sleep(0.15)
    finally:
        screen, typed = exit_and_read(term, shown, cast)
    assert "SECRET-CONTENT-42" in screen and "typed-x\r\n" in screen  # both commands ran
    # the reviewer's list (and the transcript) must name what ran, or at least mark the line as edited
    assert any("answer-key" in c for c in typed), typed
    assert any("typed-x" in c or "^Y" in c for c in typed), typed


# ---- R12a-2

def _result(agent, b, status, wall=600.0, **extra):
    return RunResult.model_validate({
        "run_id": "r", "task_id": b.task.task_id, "family": b.task.family, "agent": agent, "attempt": 1,
        "status": status, "started_at": T0, "finished_at": T0, "duration_s": wall, "task_hash": b.content_hash(),
        "agent_run": {"agent": agent, "wall_s": wall}, "trial_dir": "/nowhere", **extra})


def test_a_candidates_own_limit_error_counts_against_their_ability(tmp_path):
    from sweserve.assess.packs import choose_pack
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.results import ResultsWriter

    b1, b2 = bundle(1), bundle(2, "serving-api")
    pack = choose_pack("p", [b1, b2], 2, 7200)
    results_dir = tmp_path / "out" / "p"
    limit = {"error_kind": "limit", "reason": "submission too large: 57.2 MB, over the 10 MB limit"}
    for name, second in (("honest", _result("human-honest", b2, "failed")),
                         ("mallory", _result("human-mallory", b2, "error", **limit))):
        with ResultsWriter(results_dir / f"{name}.jsonl") as w:
            w.write(_result(f"human-{name}", b1, "resolved"))
            w.write(second)
    agents = [_result(a, b, s) for b in (b1, b2) for a, s in (("oracle", "resolved"), ("null", "failed"))]
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, agents)
    ability = {row.split(",")[0]: float(row.split(",")[12]) for row in cards.csv.read_text().splitlines()[1:]}
    # the same work (one resolved, one not, the second by the candidate's own doing) is the same ability
    assert ability["mallory"] == pytest.approx(ability["honest"], abs=0.05), ability


# ---- R12a-3

def _pack_server(tmp_path, monkeypatch):
    """An assessment server of a one-task pack, its pipeline replaced by the session alone (a fix typed is
    `resolved`), and its invite store."""
    import sweserve.assess.server as server_mod
    from sweserve.assess.invites import InviteStore
    from sweserve.assess.packs import choose_pack, save_pack
    from sweserve.evaluation.results import ResultsWriter

    boxes = []

    def fake_run_evaluation(ctx, bundles, agent, results_path, *, attempts, first_attempt, force):
        box = QuietBox(tmp_path / f"box{len(boxes)}")
        boxes.append(box)
        run = agent.solve(box, bundles[0])
        status = "resolved" if "apply-the-fix" in run.transcript else "failed"
        r = RunResult.model_validate({
            "run_id": ctx.run_id, "task_id": bundles[0].task.task_id, "family": "decoding", "agent": agent.name,
            "attempt": first_attempt, "status": status, "started_at": T0, "finished_at": T0, "duration_s": 1.0,
            "task_hash": bundles[0].content_hash(), "agent_run": run.model_dump(), "trial_dir": str(tmp_path)})
        with ResultsWriter(results_path) as w:
            w.write(r)
        return [r]

    monkeypatch.setattr(server_mod, "run_evaluation", fake_run_evaluation)
    b1 = bundle(1)
    pack = choose_pack("p", [b1], 1, 3600)
    save_pack(tmp_path / "p.yaml", pack)
    store = InviteStore(tmp_path / "invites.json")
    return server_mod.AssessServer(Ctx(), {b1.task.task_id: b1}, store, tmp_path / "out", tmp_path), store, pack


def _session(server, cookie):
    a = server.sessions[hashlib.sha256(cookie.encode()).hexdigest()]
    end = time.monotonic() + 20
    while a.seat.terminal is None and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.3)
    return a


def _finish(a):
    a.seat.submitted.set()
    end = time.monotonic() + 20
    while a.status != "done" and time.monotonic() < end:
        time.sleep(0.05)
    assert a.status == "done"


def test_a_second_session_on_the_same_pack_is_disclosed_on_the_scorecard(tmp_path, monkeypatch):
    from sweserve.assess.scorecard import write_scorecards

    server, store, pack = _pack_server(tmp_path, monkeypatch)
    for keys in ("ls; sleep 1; cat src.py\r", "echo apply-the-fix\r"):  # session 1 explores, session 2 fixes
        _, token = store.create("alice", str(tmp_path / "p.yaml"), pack.version, timedelta(hours=1))
        a = _session(server, server.begin(token))
        a.seat.terminal.write(keys.encode())
        time.sleep(1.5)
        _finish(a)
    cards = write_scorecards(pack, tmp_path / "out" / "p", tmp_path / "report", None, [])
    page = cards.pages["alice"].read_text()
    tasks = re.search(r"<table id=tasks>.*?</table>", page, re.S).group(0)
    assert "Resolved 1 of 1" in page  # the retake is what the page grades
    # but the reviewer must learn there was an earlier session on this task (and how it ended)
    assert re.search(r"attempt|session", tasks, re.I), tasks


def test_a_second_link_while_the_first_session_runs_is_refused_unspent(tmp_path, monkeypatch):
    """Two links for one pack (the hiring team sent a second after "my session broke"): opened while the first
    session ran, both wrote attempt 1 of the same results file (the candidate picks which one counts) or the
    second ended in `error` at once with its link spent (red team 12a's lead, measured by red team 14b). The
    second is now refused before its token is spent, and opens a retake (attempt 2) once the first has ended."""
    from sweserve.errors import SweserveError
    from sweserve.evaluation.results import read_results

    server, store, pack = _pack_server(tmp_path, monkeypatch)
    (_, first), (_, second) = (store.create("alice", str(tmp_path / "p.yaml"), pack.version, timedelta(hours=1))
                               for _ in range(2))
    a = _session(server, server.begin(first))
    with pytest.raises(SweserveError, match="already in progress"):
        server.begin(second)
    assert store.peek(second).used_at is None  # not spent
    _finish(a)
    _finish(_session(server, server.begin(second)))
    assert sorted(r.attempt for r in read_results(tmp_path / "out" / "p" / "alice.jsonl")) == [1, 2]


# ---- R12a-4

def test_a_candidate_cannot_stall_another_candidates_session(tmp_path):
    from websockets.sync.client import connect

    from sweserve.assess.invites import InviteStore
    from sweserve.assess.server import AssessServer, cookie_name

    server = AssessServer(None, {}, InviteStore(tmp_path / "i.json"), tmp_path, tmp_path)  # type: ignore[arg-type]
    terms = two_candidates(tmp_path, server)
    uv, thread, port = _serve(server.app())
    origin = f"http://127.0.0.1:{port}"

    def bob_state(timeout):
        req = urllib.request.Request(f"{origin}/api/state", headers={"Cookie": f"{cookie_name(port)}=bob-key"})
        return json.loads(urllib.request.urlopen(req, timeout=timeout).read())

    try:
        assert bob_state(5)["status"] == "running"
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5, close_timeout=1,
                     additional_headers={"Origin": origin, "Cookie": f"{cookie_name(port)}=mallory-key"}) as conn:
            conn.send(json.dumps({"type": "input", "data": "stty -icanon; exec sleep 12\r"}))
            time.sleep(1.0)
            for _ in range(16):
                conn.send(json.dumps({"type": "input", "data": "x" * 65536}))
            time.sleep(1.0)

            def answers(timeout=3.0):
                t0 = time.monotonic()
                try:
                    ok = bob_state(timeout)["status"] == "running"
                except (TimeoutError, urllib.error.URLError):
                    ok = False
                return ok and time.monotonic() - t0 < 2

            during = answers()
            terms["mallory"].stop(grace_s=2)  # the attacker's shell ends (at their deadline, the box is killed)
            after = answers()
        assert during and after, f"bob's /api/state answered while mallory's flood was held: {during}; " \
                                 f"after mallory's shell ended: {after}"
    finally:
        for term in terms.values():
            term.stop(grace_s=2)
        uv.should_exit = True
        thread.join(3)  # at HEAD the event loop is blocked for good: the (daemon) server thread is left behind


# ---- R12a-5

def test_the_instruction_is_not_shown_before_its_clock_starts(tmp_path, monkeypatch):
    from markdown_it import MarkdownIt

    import sweserve.assess.server as server_mod
    from sweserve.assess.agent import Seat
    from sweserve.assess.invites import Invite
    from sweserve.assess.packs import check_pack, choose_pack
    from sweserve.assess.server import Assessment

    SETUP_S = 3.0  # the pipeline's work before the agent runs: image (maybe a build), container, repository

    def fake_run_evaluation(ctx, bundles, agent, results_path, **kw):
        time.sleep(SETUP_S)
        run = agent.solve(QuietBox(tmp_path / "box"), bundles[0])
        return [RunResult.model_validate({
            "run_id": "r", "task_id": bundles[0].task.task_id, "family": "decoding", "agent": agent.name,
            "status": "failed", "started_at": T0, "finished_at": T0, "duration_s": 1.0,
            "agent_run": run.model_dump()})]

    monkeypatch.setattr(server_mod, "run_evaluation", fake_run_evaluation)
    b1 = bundle(1, instruction="Fix the SECRET-STATEMENT bug in the scheduler.")
    b1 = b1.model_copy(update={"task": b1.task.model_copy(update={"task_id": "sglang-jax-1234",
                                                                   "title": "SECRET-TITLE"})})
    pack = choose_pack("p", [b1], 1, 3600)
    invite = Invite(invite_id="x", candidate="alice", pack="p.yaml", pack_version=pack.version, token_sha256="0" * 64,
                    created_at=T0, expires_at=T0)
    a = Assessment(invite, pack, check_pack(pack, {b1.task.task_id: b1}), tmp_path / "r.jsonl", Seat("alice"))
    md = MarkdownIt("commonmark", {"html": False})
    threading.Thread(target=a.run, args=(Ctx(),), daemon=True).start()
    # the title and the id say as much as the statement: an id names the upstream PR (red team 13's lead)
    secrets = {"statement": "SECRET-STATEMENT", "title": "SECRET-TITLE", "task id": b1.task.task_id}
    free_reading = dict.fromkeys(secrets, 0.0)
    t0 = time.monotonic()
    while a.seat.terminal is None and time.monotonic() - t0 < 20:
        state = a.state(md.render)
        page = json.dumps(state)
        for what, secret in secrets.items():
            if state["left_s"] is None and secret in page:
                free_reading[what] = time.monotonic() - t0
        time.sleep(0.1)
    a.seat.submitted.set()
    end = time.monotonic() + 20
    while a.status not in ("done", "error") and time.monotonic() < end:
        time.sleep(0.05)
    early = {what: round(s, 1) for what, s in free_reading.items() if s >= 0.5}
    assert not early, f"readable before the clock started (seconds): {early}"


# ---- R12a-6

def test_commands_typed_after_a_paste_flood_are_still_listed(tmp_path, monkeypatch):
    import sweserve.assess.recorder as recorder
    from sweserve.assess.scorecard import replay_page

    monkeypatch.setattr(recorder, "CAST_MAX_BYTES", 200_000)  # 64 MiB scaled down: the flood is 128 MiB of input
    folder = tmp_path / "trial"
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], folder / "terminal.cast").start()
    shown: list[bytes] = []
    term.subscribe(shown.append)
    try:
        time.sleep(0.5)
        term.write(b"stty -echo; cat > /dev/null\r")
        time.sleep(0.3)
        for _ in range(8):  # a "paste" into cat, as a browser tab sends it: 64 KB a message
            term.write((b"\x01" * 1023 + b"\n") * 64)
        time.sleep(0.3)
        term.write(b"\x04")
        time.sleep(0.3)
        term.write(b"stty echo; echo after-the-flood-$((6*7))\r")
        time.sleep(0.5)
        term.write(b"exit\r")
        term.exited.wait(10)
    finally:
        term.stop()
    # past the record's input budget keys no longer reach the shell (red team 17d, R17d-3: they ran on no record),
    # so the command did not run; the list still says where the record of typing stopped
    assert "after-the-flood-42" not in b"".join(shown).decode(errors="replace")
    r = RunResult.model_validate({"run_id": "r", "task_id": "o__r-1", "family": "decoding", "agent": "human-a",
                                  "status": "resolved", "started_at": T0, "finished_at": T0, "duration_s": 1.0,
                                  "trial_dir": str(folder)})
    commands = re.search(r"<table id=commands>.*?</table>", replay_page("a", r), re.S).group(0)
    # the reviewer's list names the command, or at least says the record of typing stopped there
    assert "after-the-flood" in commands or re.search(r"not kept|limit|cut", commands), commands[-400:]
