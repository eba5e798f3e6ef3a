"""Red team 23t: the round-23c/23k terminal fixes (detach keys, a raw terminal until the far side speaks) and their
neighbours, attacked by a candidate at a terminal, every key theirs.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from sweserve.agents.terminal import TerminalRecorder

DETACH = "--detach-keys=ctrl-],ctrl-^,ctrl-_,ctrl-@"

# a stand-in for `docker exec -it`'s client (as test_attacks_redteam23k's): slow to start, then raw, as docker makes
# it; a ^C then is the sandbox shell's death (bash before job control); it then reads keys one read at a time, as
# docker's escape proxy does, and detaches on its detach keys, read one key a read
FAKE_DOCKER = """\
import os, select, sys, termios, time, tty
time.sleep(1.0)
tty.setraw(0, termios.TCSANOW)
if select.select([0], [], [], 0.5)[0] and b"\\x03" in (first := os.read(0, 64)):
    sys.exit(130)
os.write(1, b"$ ")
seen = b""
while select.select([0], [], [], 1.5)[0]:
    k = os.read(0, 1)
    seen += k
    if seen.endswith(b"\\x1d\\x1e\\x1f\\x00"):
        os.write(1, b"detached\\r\\n")
        sys.exit(0)
os.write(1, b"client-read " + repr(seen).encode() + b"\\r\\n")
"""


def _fake_docker(tmp_path):
    client = tmp_path / "bin" / "docker"
    client.parent.mkdir()
    client.write_text(f"#!{sys.executable}\n{FAKE_DOCKER}")
    client.chmod(0o755)
    return [str(client), "exec", "-it", DETACH, "box", "bash"]


def _session(tmp_path, argv, keys: list[bytes], gap_s: float = 0.0, wait_first: bool = False):
    """`sweserve session`'s relay (`TerminalRecorder`) running argv, with `keys` typed one write each (`gap_s`
    apart; after the client's prompt if `wait_first`); (exit code, what was shown, the recorder)."""
    r, w = os.pipe()
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
    rec = TerminalRecorder(r, fd)
    result: list[int] = []
    th = threading.Thread(target=lambda: result.append(rec.run(argv)), daemon=True)
    th.start()
    try:
        if wait_first:
            end = time.monotonic() + 10
            while b"$ " not in out.read_bytes() and time.monotonic() < end:
                time.sleep(0.05)
        for k in keys:
            os.write(w, k)
            time.sleep(gap_s)
        th.join(15)
        assert result, "the relay never ended"
        return result[0], out.read_bytes(), rec
    finally:
        os.close(w)
        th.join(5)
        os.close(r)
        os.close(fd)


# ---- R23t-1: `sweserve session`'s relay starts cooked: a key typed as the session opens kills the docker client


def test_r23t_1_session_keys_typed_as_the_terminal_opens_do_not_signal_the_docker_client(tmp_path):
    """R23k-1 was fixed in the browser relay only. `sweserve session`'s `TerminalRecorder` starts `docker exec -it`
    on a pseudo-terminal left cooked, and relays the engineer's keys at once: a ^C or ^\\ typed (or typed ahead)
    while the client starts is SIGINT/SIGQUIT for the client itself, and once it is raw, a ^C reaches the sandbox's
    shell before it has taken its terminal. The relay ends and `HumanAgent.solve` grades the task as "finished" with
    its time left. Won before the fix: the stand-in client died of the signal (exit 130/131). Defence: as the
    browser relay's, the terminal is raw from the start for such a client and keys wait for its first output."""
    code, shown, _ = _session(tmp_path, _fake_docker(tmp_path), [b"\x03\x1c"])
    assert code == 0, (code, shown)
    assert b"client-read b'\\x03\\x1c'" in shown, shown


def test_r23t_1_control_session_of_a_plain_command_keeps_its_cooked_terminal(tmp_path):
    """A command that is no docker terminal client keeps its terminal cooked: ^C interrupts it."""
    code, _, _ = _session(tmp_path, [sys.executable, "-c", "import time; print('$ ', flush=True); time.sleep(30)"],
                          [b"\x03"], wait_first=True)
    assert code != 0


# ---- R23t-2: `sweserve session`'s relay delivers the docker client's detach keys: typed, they end the task


def test_r23t_2_session_detach_keys_typed_do_not_end_the_task(tmp_path):
    """R22c-3/R23c-3 (the detach keys typed end the task) were fixed in the browser relay only: `sweserve session`
    runs the same `docker exec -it --detach-keys=ctrl-],ctrl-^,ctrl-_,ctrl-@` and its relay passes every key. Typed
    one at a time (^] ^^ ^_ Ctrl-Space), the client detaches, the relay ends with the shell still running in the
    sandbox, and the task is graded as "finished" with its time left. Won before the fix: "detached". Defence: the
    relay never delivers the key that completes the sequence; the record keeps what the client was given."""
    keys = [b"\x1d", b"\x1e", b"\x1f", b"\x00", b"x"]
    code, shown, rec = _session(tmp_path, _fake_docker(tmp_path), keys, gap_s=0.1, wait_first=True)
    assert b"detached" not in shown, shown
    assert b"client-read b'\\x1d\\x1e\\x1fx'" in shown, shown
    assert "⟨^]⟩⟨^^⟩⟨^_⟩" in rec.record.keystrokes()


def test_r23t_2_control_session_keys_that_form_no_detach_sequence_all_arrive(tmp_path):
    keys = [b"\x1d", b"\x1e", b"a", b"\x00", b"\x1f"]
    code, shown, _ = _session(tmp_path, _fake_docker(tmp_path), keys, gap_s=0.1, wait_first=True)
    assert code == 0 and b"client-read b'\\x1d\\x1ea\\x00\\x1f'" in shown, shown


# ---- R23t-3: R23h-7's kept end, defeated by padding: the ^C and the command that ran sit in the unshown middle


def test_r23t_3_a_key_in_a_long_entrys_unshown_middle_is_named():
    """R23h-7 keeps a long entry's first three quarters and last quarter, so that what a flood's ^C left to run is
    shown. Padding the command that runs past the kept end (16 Ki spaces, which bash ignores) puts the ^C and the
    command in the middle, which is only counted: the list shows x's, "N more characters typed", and spaces, and
    nothing says that the line the reviewer half sees was cancelled and another run. Won before the fix: no ⟨^C⟩
    nor ^C in the entry. Defence: the middle's count names the keys it hides (as kinds and counts, bounded)."""
    from sweserve.agents.terminal import typed_lines

    (entry,) = typed_lines([(1.0, "i", "x" * 70_000), (2.0, "i", "\x03"),
                            (60.0, "i", "cat answer-key.txt" + " " * 20_000 + "\r")])
    assert "not shown here" in entry[1] and len(entry[1]) < 70_000
    assert "^C" in entry[1], entry[1][48_000:49_200]


def test_r23t_3_control_a_long_entry_of_text_alone_names_no_key():
    from sweserve.agents.terminal import TOKEN, typed_lines

    (entry,) = typed_lines([(1.0, "i", "x" * 70_000 + "\r")])
    assert "not shown here" in entry[1] and "^" not in entry[1]
    assert len(TOKEN.findall(entry[1])) == 2  # the over-a-line marker and the count, no key
