"""Red team 23k: the round-23c assess fixes and their neighbours (`sweserve/assess/`), attacked by a candidate at the
browser terminal, every websocket message theirs.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working.
"""

from __future__ import annotations

import sys
import time

from sweserve.assess.recorder import BrowserTerminal

# ---- R23k-1: keys typed before the docker client has made its terminal raw are signals to the client itself

# a stand-in for `docker exec -it`'s client: slow to start (as docker is, ~0.1-1 s), then raw, as docker makes it,
# and it says what keys it read
FAKE_DOCKER = """\
import os, select, sys, termios, time, tty
time.sleep(1.0)
tty.setraw(0, termios.TCSANOW)  # as docker does: what was typed before is kept
# the sandbox's shell starting: a ^C now is one its own terminal turns into SIGINT for it (bash dies, 130)
if select.select([0], [], [], 0.5)[0] and b"\\x03" in os.read(0, 64):
    sys.exit(130)
os.write(1, b"$ ")
os.write(1, b"client-read " + repr(os.read(0, 64)).encode() + b"\\r\\n")
"""


def _fake_docker(tmp_path):
    client = tmp_path / "bin" / "docker"
    client.parent.mkdir()
    client.write_text(f"#!{sys.executable}\n{FAKE_DOCKER}")
    client.chmod(0o755)
    return [str(client), "exec", "-it", "--detach-keys=ctrl-],ctrl-^,ctrl-_,ctrl-@", "box", "bash"]


def _screen(term: BrowserTerminal) -> bytes:
    return bytes(term.record.screen)


def test_r23k_1_keys_typed_as_the_terminal_opens_do_not_signal_the_docker_client(tmp_path):
    """The relay's pseudo-terminal starts cooked: until the docker client has started and made it raw (a tenth of a
    second to a second, longer on a loaded host), its line discipline turns ^C into SIGINT and ^\\ into SIGQUIT for
    the client itself, not the sandbox's shell. The client dies (^\\ also prints its Go stacks and registers to the
    candidate), the relay ends, and `BrowserAgent.solve` grades the task as "finished" with its time left: R23c-3's
    ending by keys, by other keys. Once the client is raw, the same keys reach the sandbox's shell before it has
    taken its terminal (job control) and kill it there (bash, or `timeout --foreground`: exit 130). Won before the
    fix (real docker: exit 130 on ^C, 2 and a stack dump on ^\\). Defence: the relay's terminal is raw from the
    start for a client that relays a terminal of its own, and it is given no key until the far side has shown
    something (the shell's prompt)."""
    term = BrowserTerminal(_fake_docker(tmp_path), tmp_path / "c.cast").start()
    try:
        term.write(b"\x03\x1c")
        assert term.exited.wait(10), "the client never ended"
        assert term.exit_code == 0, (term.exit_code, _screen(term))
        assert b"client-read b'\\x03\\x1c'" in _screen(term), _screen(term)
    finally:
        term.stop()


def test_r23k_1_control_a_plain_command_keeps_its_cooked_terminal(tmp_path):
    """A command that is no docker terminal client keeps the terminal as a shell expects it: ^C interrupts it."""
    term = BrowserTerminal([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                           tmp_path / "c.cast").start()
    try:
        end = time.monotonic() + 10
        while b"up" not in _screen(term) and time.monotonic() < end:
            time.sleep(0.05)
        term.write(b"\x03")
        assert term.exited.wait(10) and term.exit_code != 0
    finally:
        term.stop()


# ---- R23k-2: Start on a pack that no longer matches its tasks shows the task ids (the upstream PRs) to the candidate


def _invited(tmp_path, task_bundles):
    """A server whose tasks folder holds `task_bundles`, and an invite to a pack of task o__r-1 made before."""
    from datetime import timedelta

    from test_assess import bundle

    from sweserve.assess.invites import InviteStore
    from sweserve.assess.packs import choose_pack, save_pack
    from sweserve.assess.server import AssessServer

    pack = choose_pack("p", [bundle(1)], 1, 3600)
    save_pack(tmp_path / "p.yaml", pack)
    store = InviteStore(tmp_path / "i.json")
    _, token = store.create("cand", str(tmp_path / "p.yaml"), pack.version, timedelta(days=1))
    tasks = {b.task.task_id: b for b in task_bundles}
    return AssessServer(None, tasks, store, tmp_path / "out", tmp_path), token  # type: ignore[arg-type]


def _start_page(port: int, token: str) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", f"/i/{token}", headers={"Content-Length": "0"})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def test_r23k_2_a_pack_out_of_step_with_its_tasks_names_no_task_to_the_candidate(tmp_path):
    """`begin` checks the pack against the tasks folder before spending the token, and Start's 409 page showed
    `check_pack`'s error whole: "pack p: task o__r-1 is not in the tasks folder" (or "changed since the pack was
    made"). A task id is `owner__repo-<PR number>`: the candidate learns, before any clock runs, which upstream PR
    each task is (its merged diff is the reference solution), studies it, and comes back with the same link, which
    stays valid, once the hiring team has fixed the pack. Task ids are never shown before a task's clock runs
    (red team 13). Won before the fix: the page held o__r-1. Defence: the page says the assessment is unavailable;
    the reason goes to the server's log, for the hiring team."""
    from test_assess import bundle
    from test_attacks_redteam17d import Running

    for tasks in ([], [bundle(1, instruction="another statement")]):
        server, token = _invited(tmp_path / str(len(tasks)), tasks)
        with Running(server) as srv:
            status, body = _start_page(srv.port, token)
        assert status == 409, (status, body)
        assert b"o__r-1" not in body and b"o__r" not in body, body
        assert server.store.peek(token).candidate == "cand"  # control: the link is not spent


def test_r23k_2_control_a_pack_in_step_starts(tmp_path, monkeypatch):
    from test_assess import bundle
    from test_attacks_redteam17d import Running

    from sweserve.assess.server import Assessment

    monkeypatch.setattr(Assessment, "run", lambda self, ctx: None)
    server, token = _invited(tmp_path, [bundle(1)])
    with Running(server) as srv:
        status, _ = _start_page(srv.port, token)
    assert status == 303
