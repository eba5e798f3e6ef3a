"""Assessments without Docker: packs, invites (and their pages on a real server), the host-side recorder
(attacked from the shell it records), and the Rasch fit recovering known parameters."""

import dataclasses
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta

import numpy as np
import pytest

from sweserve.assess.difficulty import calibrate, fit_rasch
from sweserve.assess.invites import InviteStore, Refused, parse_duration
from sweserve.assess.packs import (
    DEFAULT_BUDGET_S,
    check_pack,
    choose_pack,
    load_pack,
    save_pack,
    task_budget_s,
)
from sweserve.assess.recorder import BrowserTerminal, commands_from_cast, read_cast
from sweserve.errors import SweserveError
from sweserve.models import Readiness, RunResult, Task, TaskBundle, TestSpec, ValidationRecord

T0 = "2026-01-01T00:00:00Z"


@dataclasses.dataclass
class Ctx:
    """What an assessment reads of its context when the pipeline is replaced: the run id."""

    results_run_id: str | None = None

    @property
    def run_id(self):
        return self.results_run_id or "r"


def bundle(n, family="decoding", validated=True, instruction="i", ready=None):
    task = Task(task_id=f"o__r-{n}", repo="o/r", profile="sglang", pr_number=n, title=f"t{n}",
                base_commit="a" * 40, merge_commit="b" * 40, family=family, created_at=T0,
                test=TestSpec(files=["test/test_a.py"]), FAIL_TO_PASS=["test/test_a.py::t"] if validated else [],
                validation=ValidationRecord(status="valid", runs=1) if validated else None,
                readiness=Readiness(ready=validated if ready is None else ready))
    return TaskBundle(task=task, instruction=instruction, oracle_patch="o", tests_patch="t")


# ---- packs

def test_budget_follows_difficulty_with_a_default_when_uncalibrated():
    assert task_budget_s(None) == DEFAULT_BUDGET_S
    assert task_budget_s(-1.0) < task_budget_s(0.0) == DEFAULT_BUDGET_S < task_budget_s(1.5) == 2 * DEFAULT_BUDGET_S
    assert task_budget_s(-20) == 600 and task_budget_s(20) == 7200


def test_a_pack_takes_ready_tasks_in_the_band_and_budget_spread_over_families(tmp_path):
    bundles = [bundle(1), bundle(2), bundle(3, "serving-api"), bundle(4, validated=False), bundle(5, "kernels-quant"),
               bundle(6, "serving-api")]
    diff = {"o__r-1": 0.0, "o__r-2": 3.0, "o__r-3": 0.5, "o__r-6": -0.5, "o__r-5": -4.0}
    pack = choose_pack("p", bundles, 2, 3600, ["decoding", "serving-api"], (-1, 1), diff)
    ids = [t.task_id for t in pack.tasks]
    assert sorted(ids) == ["o__r-1", "o__r-6"]  # one per family, easier first; -2 out of band, -4 never ready
    assert pack.time_budget_s <= 3600
    path = tmp_path / "p.yaml"
    save_pack(path, pack)
    again = load_pack(path)
    assert again == pack and "content_hash" in path.read_text()
    assert check_pack(again, {b.task.task_id: b for b in bundles})[0].task.task_id == ids[0]
    with pytest.raises(SweserveError, match="only 2 ready"):
        choose_pack("p", bundles, 3, 3600, ["decoding", "serving-api"], (-1, 1), diff)
    with pytest.raises(SweserveError, match="only 0 ready"):
        choose_pack("p", [bundle(4, validated=False)], 1, 3600)
    with pytest.raises(SweserveError, match="only 0 ready"):  # valid but not ready (a lint or signal check failed)
        choose_pack("p", [bundle(7, ready=False)], 1, 3600)


def test_a_pack_is_versioned_by_content_and_refuses_a_changed_task(tmp_path):
    pack = choose_pack("p", [bundle(1)], 1, 3600)
    changed = bundle(1, instruction="another statement")
    with pytest.raises(SweserveError, match="changed since the pack"):
        check_pack(pack, {"o__r-1": changed})
    path = tmp_path / "p.yaml"
    save_pack(path, pack)
    path.write_text(path.read_text().replace(pack.tasks[0].content_hash, changed.content_hash()))
    with pytest.raises(SweserveError, match="does not match its tasks"):
        load_pack(path)
    path.write_text("tasks: [1, 2\n")
    with pytest.raises(SweserveError, match="not valid YAML"):
        load_pack(path)
    path.write_text("name: p\nversion: x\ntasks: []\n")
    with pytest.raises(SweserveError, match="p.yaml"):
        load_pack(path)


# ---- invites

def test_a_token_is_stored_hashed_works_once_and_expires(tmp_path):
    store = InviteStore(tmp_path / "invites.json")
    invite, token = store.create("alice", "p.yaml", "0" * 16, timedelta(hours=1))
    assert token not in (tmp_path / "invites.json").read_text() and invite.token_sha256 in (tmp_path / "invites.json").read_text()
    assert oct(os.stat(tmp_path / "invites.json").st_mode & 0o777) == "0o600"
    assert store.peek(token).candidate == "alice"
    assert store.redeem(token).candidate == "alice"
    with pytest.raises(Refused, match="already been used"):
        store.redeem(token)
    with pytest.raises(Refused, match="not valid"):
        store.redeem(token[:-1])
    _, old = store.create("bob", "p.yaml", "0" * 16, timedelta(seconds=1))
    time.sleep(1.1)
    with pytest.raises(Refused, match="expired"):
        store.redeem(old)
    assert parse_duration("90m") == timedelta(minutes=90)
    for bad in ("", "5", "h", "-1h", "1y"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_two_tabs_racing_on_one_link_get_one_session(tmp_path):
    store = InviteStore(tmp_path / "invites.json")
    _, token = store.create("alice", "p.yaml", "0" * 16, timedelta(hours=1))
    wins, losses = [], []

    def go():
        try:
            wins.append(store.redeem(token))
        except Refused:
            losses.append(1)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_used_expired_and_wrong_tokens_get_a_clear_page_never_a_trace(tmp_path):
    import uvicorn

    from sweserve.assess.server import AssessServer

    store = InviteStore(tmp_path / "invites.json")
    _, used = store.create("alice", str(tmp_path / "missing.yaml"), "0" * 16, timedelta(hours=1))
    _, expired = store.create("bob", "p.yaml", "0" * 16, timedelta(seconds=1))
    _, broken = store.create("carol", str(tmp_path / "missing.yaml"), "0" * 16, timedelta(hours=1))
    store.redeem(used)
    time.sleep(1.1)
    server = AssessServer(None, {}, store, tmp_path / "out", tmp_path)  # type: ignore[arg-type]
    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(server.app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    for _ in range(100):
        if uv.started:
            break
        time.sleep(0.05)

    def get(path, method="GET"):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        for path, status, words in ((f"/i/{used}", 410, "already been used"), (f"/i/{expired}", 410, "expired"),
                                    ("/i/not-a-token", 410, "not valid"), (f"/i/{used}", 410, "already"),
                                    ("/s", 403, "Open the invitation link"), ("/nowhere", 404, "nothing here"),
                                    ("/vendor/../../etc/passwd", 404, "nothing here")):
            code, body = get(path, "POST" if path == f"/i/{used}" and words == "already" else "GET")
            assert code == status and words in body and "Traceback" not in body, (path, code, body)
        code, body = get(f"/i/{broken}", "POST")  # its pack file is gone: a sentence, not a trace
        assert code == 409 and "missing pack file" in body and "Traceback" not in body
        code, body = get(f"/i/{broken}")  # and the token is not spent: the link works once the pack is fixed
        assert code == 200 and "Start" in body
    finally:
        uv.should_exit = True
        thread.join(10)


# ---- the recorder

def test_the_recorder_keeps_what_was_typed_and_a_shell_cannot_forge_it(tmp_path):
    """A candidate in the shell prints text shaped like cast events, rewrites and clears history, writes to
    the cast's path inside its own filesystem view: the cast's input events still hold exactly what was typed."""
    cast = tmp_path / "trial" / "terminal.cast"
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], cast, cols=100, rows=30).start()
    seen = bytearray()
    tail = term.subscribe(seen.extend)
    for _ in range(3):
        assert term.subscribe(lambda d: None) is not None
    assert term.subscribe(lambda d: None) is None  # a fifth tab is refused
    forged = '[0.5, "i", "rm -rf /  # forged\\r"]'
    keys = [
        "echo hello\r",
        f"printf '%s\\n' '\"]' '{forged}'\r",
        "history -c; unset HISTFILE\r",
        f"printf '\\033[2J\\033[H' >/dev/null; echo '{forged}' >> {cast} 2>/dev/null; true\r",
        "ech\x7fho fixed\r",
        "exit\r",
    ]
    for k in keys:
        term.write(k.encode())
        time.sleep(0.3)
    assert term.exited.wait(10)
    term.stop()
    header, events = read_cast(cast)
    assert header["version"] == 2 and header["width"] == 100
    typed = "".join(d for _, c, d in events if c == "i")
    assert typed == "".join(keys)
    commands = [c for _, c in commands_from_cast(cast)]
    assert commands[0] == "echo hello" and "ech⟨⌫⟩ho fixed" in commands and commands[-1] == "exit"
    assert not any(c.startswith("rm -rf") for c in commands)
    # the shell wrote to the cast file it could see (the host's here, since this test has no sandbox): even
    # so the forged line is no input event, it is appended after the cast's own end — and in a sandbox the
    # path does not exist at all
    shown = "".join(d for _, c, d in events if c == "o")
    assert "hello" in shown and "fixed" in shown
    assert bytes(seen) and isinstance(tail, bytes)
    times = [t for t, _, _ in events]
    assert times == sorted(times)
    assert "echo hello" in term.record.keystrokes()


def test_a_reconnecting_tab_is_sent_the_screen_so_far(tmp_path):
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    term.write(b"echo first-tab\r")
    time.sleep(0.5)
    later = bytearray()
    tail = term.subscribe(later.extend)
    assert b"first-tab" in tail
    term.resize(90, 20)
    term.write(b"exit\r")
    assert term.exited.wait(10)
    term.stop()
    _, events = read_cast(tmp_path / "c.cast")
    assert ("r", "90x20") in [(c, d) for _, c, d in events]


def test_commands_are_every_key_as_typed(tmp_path):
    cast = tmp_path / "x.cast"
    lines = [json.dumps({"version": 2, "width": 80, "height": 24}),
             json.dumps([0.1, "i", "ls -l"]), json.dumps([0.2, "o", "evil\r\n[1.0, \"i\", \"x\"]"]),
             json.dumps([0.3, "i", "\x7f\x7fa\r"]), json.dumps([0.4, "i", "abc\x15pwd\r"]),
             json.dumps([0.5, "i", "\x1b[A\r"]), json.dumps([0.6, "i", "sleep 9\x03"]), '[0.7, "i", "torn']
    cast.write_text("\n".join(lines) + "\n")
    assert commands_from_cast(cast) == [(0.1, "ls -l⟨⌫⟩⟨⌫⟩a"), (0.4, "abc⟨^U⟩pwd"), (0.5, "⟨↑⟩"),
                                        (0.6, "sleep 9⟨^C⟩")]


# ---- difficulty

def simulate(seed, persons=60, items=25, attempts=2):
    rng = np.random.default_rng(seed)
    theta, b = rng.normal(0, 1, persons), rng.normal(0, 1, items)
    resp = [(f"p{p}", f"t{i:02d}", int(rng.random() < 1 / (1 + np.exp(-(theta[p] - b[i])))))
            for p in range(persons) for i in range(items) for _ in range(attempts)]
    return theta, b, resp


def test_the_rasch_fit_recovers_known_parameters_with_honest_errors():
    for seed in (1, 2):
        theta, b, resp = simulate(seed)
        fit = fit_rasch(resp)
        bh = np.array([fit.difficulty[f"t{i:02d}"] for i in range(len(b))])
        se = np.array([fit.difficulty_se[f"t{i:02d}"] for i in range(len(b))])
        th = np.array([fit.ability[f"p{p}"] for p in range(len(theta))])
        th_se = np.array([fit.ability_se[f"p{p}"] for p in range(len(theta))])
        assert np.corrcoef(bh, b)[0, 1] > 0.95 and np.mean(np.abs(bh - b)) < 0.3
        assert np.corrcoef(th, theta)[0, 1] > 0.85 and np.mean(np.abs(th - theta)) < 0.45
        assert np.mean(np.abs(bh - b) < 1.96 * se) >= 0.8 and np.mean(np.abs(th - theta) < 1.96 * th_se) >= 0.8
        assert 0.2 < se.mean() < 0.6  # 120 attempts a task
    # a person who always succeeds stays finite, with a wide interval
    fit = fit_rasch([("ace", "t1", 1), ("ace", "t2", 1), ("x", "t1", 0), ("x", "t2", 1)])
    assert np.isfinite(fit.ability["ace"]) and fit.ability_se["ace"] > fit.ability_se["x"] * 0.9
    assert fit.difficulty["t1"] > fit.difficulty["t2"]


def test_calibration_counts_graded_attempts_and_times_to_solve():
    def r(agent, task, status, wall, attempt=1):
        return RunResult.model_validate({
            "run_id": "r", "task_id": task, "family": "decoding", "agent": agent, "attempt": attempt,
            "status": status, "started_at": T0, "finished_at": T0, "duration_s": wall,
            "agent_run": {"agent": agent, "wall_s": wall}})

    results = [r("human-a", "t1", "resolved", 600), r("human-b", "t1", "failed", 900), r("oracle", "t1", "resolved", 10),
               r("null", "t1", "failed", 5), r("null", "t2", "failed", 5), r("human-a", "t2", "resolved", 1200),
               r("human-a", "t2", "error", 3, attempt=2), r("oracle", "t2", "skipped", 0, attempt=3)]
    cal = calibrate(results)
    t1 = next(t for t in cal.tasks if t.task_id == "t1")
    assert (t1.attempts, t1.solved, t1.humans, t1.median_solve_s) == (4, 2, 2, 305)
    t2 = next(t for t in cal.tasks if t.task_id == "t2")
    assert (t2.attempts, t2.solved, t2.median_solve_s) == (2, 1, 1200)


def test_report_difficulty_lists_tasks(tmp_path):
    import subprocess

    path = tmp_path / "r.jsonl"
    lines = []
    for agent, status in (("human-a", "resolved"), ("oracle", "resolved"), ("null", "failed")):
        lines.append(json.dumps({"run_id": "r", "task_id": "o__r-1", "family": "decoding", "agent": agent,
                                 "status": status, "started_at": T0, "finished_at": T0, "duration_s": 60.0}))
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(path), "--difficulty"],
                         capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "o__r-1" in out and "solve rate" in out and "67%" in out and "human-a" in out
    js = json.loads(subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(path), "--difficulty", "--json"],
                                   capture_output=True, text=True, check=True).stdout)
    assert js["tasks"][0]["task_id"] == "o__r-1" and js["tasks"][0]["se"] > 0


# ---- the server's websocket, with a local shell standing in for the sandbox's

def test_the_websocket_serves_only_its_own_session_and_resumes_it(tmp_path):
    import hashlib

    import uvicorn
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from sweserve.assess.agent import Seat
    from sweserve.assess.invites import Invite
    from sweserve.assess.server import Assessment, AssessServer, cookie_name

    pack = choose_pack("p", [bundle(1)], 1, 3600)
    invite = Invite(invite_id="x", candidate="alice", pack="p.yaml", pack_version=pack.version, token_sha256="0" * 64,
                    created_at=T0, expires_at=T0)
    seat = Seat("alice")
    a = Assessment(invite, pack, [bundle(1)], tmp_path / "r.jsonl", seat, status="running")
    server = AssessServer(None, {}, InviteStore(tmp_path / "i.json"), tmp_path, tmp_path)  # type: ignore[arg-type]
    server.sessions[hashlib.sha256(b"alice-key").hexdigest()] = a
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    seat.take("o__r-1", term, time.time() + 600)
    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(server.app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait = time.monotonic() + 10
    while not uv.started and time.monotonic() < wait:
        time.sleep(0.05)
    origin = f"http://127.0.0.1:{port}"

    def ws(cookie="alice-key", origin=origin):
        headers = {"Origin": origin}
        if cookie:
            headers["Cookie"] = f"{cookie_name(port)}={cookie}"
        return connect(f"ws://127.0.0.1:{port}/ws", additional_headers=headers, open_timeout=5)

    def read_until(conn, text, timeout=10):
        got = b""
        end = time.monotonic() + timeout
        while text.encode() not in got and time.monotonic() < end:
            try:
                got += conn.recv(timeout=max(0.1, end - time.monotonic()))
            except TimeoutError:
                break
        return got.decode(errors="replace")

    try:
        for bad in ({"cookie": None}, {"cookie": "guessed"}, {"origin": "http://evil.example"}):
            with pytest.raises(InvalidStatus) as refused:  # refused at the handshake, before any byte
                ws(**bad)
            assert refused.value.response.status_code == 403
        with ws() as conn:
            conn.send(json.dumps({"type": "input", "data": "echo one-$((40+2))\r"}))
            assert "one-42" in read_until(conn, "one-42")
            conn.send("not json")
            conn.send(json.dumps(["input", "x"]))
            conn.send(json.dumps({"type": "resize", "cols": "wide", "rows": 1}))
        with ws() as conn:  # a new tab: the screen so far, then the same shell
            assert "one-42" in read_until(conn, "one-42")
            conn.send(json.dumps({"type": "input", "data": "echo two-$((1+1))\r"}))
            assert "two-2" in read_until(conn, "two-2")
        state = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{origin}/api/state", headers={"Cookie": f"{cookie_name(port)}=alice-key"})).read())
        assert state["status"] == "running" and 590 <= state["left_s"] <= 600 and state["task_id"] == "o__r-1"
        urllib.request.urlopen(urllib.request.Request(f"{origin}/api/submit", method="POST", data=b"",
                                                      headers={"Cookie": f"{cookie_name(port)}=alice-key"}))
        assert seat.submitted.is_set()
        with pytest.raises(urllib.error.HTTPError):  # another's submit needs their cookie
            urllib.request.urlopen(urllib.request.Request(f"{origin}/api/submit", method="POST", data=b""))
    finally:
        term.write(b"exit\r")
        term.exited.wait(10)
        term.stop()
        uv.should_exit = True
        thread.join(10)
    typed = [c for _, c in commands_from_cast(tmp_path / "c.cast")]
    assert typed == ["echo one-$((40+2))", "echo two-$((1+1))", "exit"]


def test_reviewer_pages_escape_what_the_candidate_produced(tmp_path):
    from sweserve.assess.scorecard import replay_page

    folder = tmp_path / "trial"
    folder.mkdir()
    evil = "</script><script>alert(1)</script>"
    (folder / "terminal.cast").write_text("\n".join([json.dumps({"version": 2, "width": 80, "height": 24}),
                                                     json.dumps([0.1, "o", evil]), json.dumps([0.2, "i", evil + "\r"])]) + "\n")
    r = RunResult.model_validate({"run_id": "r", "task_id": "o__r-1", "family": "decoding", "agent": "human-a",
                                  "status": "failed", "started_at": T0, "finished_at": T0, "duration_s": 1.0,
                                  "model_patch": f"+{evil}\n", "trial_dir": str(folder),
                                  "tests": {"fail_to_pass": {evil: "failed"}}})
    page = replay_page("a", r)
    assert "<script>alert(1)" not in page and page.count("</script>") == 2  # the player: its file, its call


def test_bad_input_to_assess_is_one_line(tmp_path):
    import subprocess

    from sweserve.dataset.taskstore import save_bundle

    tasks = tmp_path / "tasks"
    save_bundle(tasks, bundle(1))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "sweserve.cli", "assess", *args], capture_output=True, text=True,
                              cwd=tmp_path)

    common = ["--tasks", str(tasks), "--state-dir", str(tmp_path / "state")]
    ok = cli("pack", "--name", "p", "--count", "1", "--minutes", "30", "--out", str(tmp_path / "p.yaml"), *common)
    assert ok.returncode == 0, ok.stderr
    for args, words in ((("pack", "--name", "p", "--count", "1", "--minutes", "30", "--band", "x"), "--band x"),
                        (("pack", "--name", "p", "--count", "2", "--minutes", "30"), "only 1 ready"),
                        (("pack", "--name", "p", "--count", "1", "--minutes", "30", "--family", "web"), "--family web"),
                        (("invite", "nope.yaml", "--candidate", "a"), "missing pack file"),
                        (("invite", str(tmp_path / "p.yaml"), "--candidate", "a b"), "--candidate"),
                        (("invite", str(tmp_path / "p.yaml"), "--candidate", "a", "--expires-in", "5y"), "--expires-in"),
                        (("serve", "--node-modules", str(tmp_path)), "make setup"),
                        (("report", str(tmp_path / "p.yaml"), "--output", str(tmp_path / "none")), "no results")):
        got = cli(*args, *common)
        assert got.returncode == 2 and words in got.stderr and "Traceback" not in got.stderr, (args, got.stderr)
        assert len(got.stderr.strip().splitlines()) == 1, got.stderr



class QuietBox:
    """A local folder standing in for a sandbox: files written with their /sweserve and /testbed paths mapped
    into it, and the session's end-of-session kill recorded, never run (here it would reach the whole host)."""

    def __init__(self, root):
        from local_backend import LocalSandbox

        self.box = LocalSandbox(root)
        (root / "testbed").mkdir(parents=True)
        self.killed = False

    def put_file(self, path, data, mode=0o644):
        self.box.put_file(path, self.box._text(data.decode()).encode(), mode)

    def kill(self):
        self.killed = True

    def interactive_argv(self, shell, tty):
        return self.box.interactive_argv(shell, tty)


def test_a_pack_of_two_tasks_runs_them_one_after_another(tmp_path, monkeypatch):
    """The assessment's sequencing and the page's state, with the pipeline replaced by a local shell (the
    Docker e2e test runs the real one)."""
    from markdown_it import MarkdownIt

    import sweserve.assess.server as server_mod
    from sweserve.assess.agent import Seat
    from sweserve.assess.invites import Invite
    from sweserve.assess.server import Assessment

    boxes = []
    run_ids: list[str] = []

    def fake_run_evaluation(ctx, bundles, agent, results_path, **kw):
        box = QuietBox(tmp_path / f"box{len(boxes)}")
        boxes.append(box)
        run_ids.append(ctx.run_id)
        run = agent.solve(box, bundles[0])
        return [RunResult.model_validate({
            "run_id": "r", "task_id": bundles[0].task.task_id, "family": "decoding", "agent": agent.name,
            "status": "failed", "started_at": T0, "finished_at": T0, "duration_s": 1.0,
            "agent_run": run.model_dump()})]

    monkeypatch.setattr(server_mod, "run_evaluation", fake_run_evaluation)
    bundles = [bundle(1, instruction="# First\n<script>x</script>"), bundle(2, "serving-api", instruction="Second")]
    pack = choose_pack("p", bundles, 2, 7200)
    invite = Invite(invite_id="x", candidate="alice", pack="p.yaml", pack_version=pack.version, token_sha256="0" * 64,
                    created_at=T0, expires_at=T0)
    a = Assessment(invite, pack, check_pack(pack, {b.task.task_id: b for b in bundles}), tmp_path / "r.jsonl",
                   Seat("alice"))
    md = MarkdownIt("commonmark", {"html": False})
    thread = threading.Thread(target=a.run, args=(Ctx(),), daemon=True)
    thread.start()
    for n in (1, 2):
        deadline = time.monotonic() + 20
        while (a.seat.terminal is None or a.seat.task_id != a.bundles[n - 1].task.task_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        state = a.state(md.render)
        assert state["status"] == "running" and state["index"] == n and state["count"] == 2
        assert state["left_s"] > 1700 and "<script>" not in state["instruction_html"]
        a.seat.terminal.write(f"echo task-{n}\r".encode())
        time.sleep(0.5)
        a.seat.submitted.set()
    thread.join(20)
    assert a.status == "done" and len(a.results) == 2 and all(b.killed for b in boxes)
    assert [r.agent_run.exit_reason for r in a.results] == ["submitted", "submitted"]
    assert len(set(run_ids)) == 2 and "r" not in run_ids  # each task a run of its own, never the shared id
    for r, b, run_id in zip(a.results, a.bundles, run_ids, strict=True):
        cast = tmp_path / "runs" / run_id / "human-alice" / b.task.task_id / "1" / "terminal.cast"
        assert ("echo task-" in "".join(d for _, c, d in read_cast(cast)[1] if c == "i"))
        assert "echo task-" in r.agent_run.transcript


def test_scorecards_and_csv_of_a_pack(tmp_path):
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.results import ResultsWriter

    b1, b2 = bundle(1), bundle(2, "serving-api")
    pack = choose_pack("p", [b1, b2], 2, 7200)
    results_dir = tmp_path / "out" / "p"

    def res(agent, b, status, wall, task_hash=None, attempt=1):
        return RunResult.model_validate({
            "run_id": "r", "task_id": b.task.task_id, "family": b.task.family, "agent": agent, "attempt": attempt,
            "status": status, "started_at": T0, "finished_at": T0, "duration_s": wall,
            "task_hash": task_hash or b.content_hash(), "tests": {"fail_to_pass": {"t::a": "passed" if status == "resolved" else "failed"},
                                                                  "pass_to_pass": {"t::b": "passed"}},
            "agent_run": {"agent": agent, "wall_s": wall}, "trial_dir": str(tmp_path / "nowhere")})

    for name, rows in (("alice", [res("human-alice", b1, "failed", 100), res("human-alice", b1, "resolved", 900, attempt=2),
                                  res("human-alice", b2, "resolved", 1200)]),
                       ("bob", [res("human-bob", b1, "failed", 1800), res("human-bob", b2, "failed", 1800, "f" * 16)])):
        with ResultsWriter(results_dir / f"{name}.jsonl") as w:
            for r in rows:
                w.write(r)
    agents = [res("oracle", b1, "resolved", 10), res("oracle", b2, "resolved", 10), res("null", b1, "failed", 5),
              res("null", b2, "failed", 5)]
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, agents)
    assert sorted(cards.pages) == ["alice", "bob"]
    alice = cards.pages["alice"].read_text()
    assert "Resolved 2 of 2" in alice and "15.0 of 30 min" in alice and "2 / 2" in alice and "oracle" in alice
    assert "another version" in cards.pages["bob"].read_text()
    rows = cards.csv.read_text().splitlines()
    assert rows[0].split(",")[:6] == ["candidate", "pack", "pack_version", "task_id", "same_task", "status"]
    assert len(rows) == 5 and any(r.startswith("bob,p,") and ",no,failed," in r for r in rows)
    assert (tmp_path / "report" / "replay-alice.o__r-1.html").read_text().count("No recording") == 1
