"""A human session's terminal, recorded on the host: what the sandbox side does cannot change the record."""

import json
import subprocess
import sys
import textwrap

import pexpect

from sweserve.agents.terminal import KEYS_MAX_BYTES, TerminalRecord, plain_text
from sweserve.reporting.review import _fence

# a stand-in for `docker exec -it … bash`: the recorder relays a local shell and writes what it kept
PROGRAM = textwrap.dedent("""
    import json, sys
    from sweserve.agents.terminal import TerminalRecorder
    rec = TerminalRecorder(0, 1)
    code = rec.run(["bash", "--norc", "--noprofile", "-i"])
    json.dump({"code": code, "keys": rec.record.keystrokes(), "screen": rec.record.screen_text()},
              open(sys.argv[1], "w"))
""")


def _spawn(tmp_path):
    out = tmp_path / "record.json"
    child = pexpect.spawn(sys.executable, ["-c", PROGRAM, str(out)], cwd=str(tmp_path), encoding="utf-8",
                          timeout=30, dimensions=(50, 200), env={"PS1": "PROMPT> ", "PATH": "/usr/bin:/bin",
                                                                 "HOME": str(tmp_path), "TERM": "xterm"})
    return child, out


def test_what_was_typed_is_kept_though_the_shell_keeps_no_history(tmp_path):
    child, out = _spawn(tmp_path)
    child.expect("PROMPT> ")
    child.sendline("set +o history; unset HISTFILE; history -c")
    child.expect("PROMPT> ")
    child.sendline("echo hidden-$((6*7))")
    child.expect("hidden-42")
    child.sendline("stty size")
    child.expect("50 200")  # the engineer's window size, passed on
    child.sendline(r"printf '\033[31mred\033[0m\033]0;title\007 \033[2Jafter\n'")
    child.expect("after")
    child.sendline("exit 7")
    child.expect(pexpect.EOF)
    child.close()
    rec = json.loads(out.read_text())
    assert rec["code"] == 7
    typed = [line.split("s  ", 1)[1] for line in rec["keys"].splitlines()]
    assert typed[:2] == ["set +o history; unset HISTFILE; history -c", "echo hidden-$((6*7))"]
    assert typed[-1] == "exit 7"
    screen = rec["screen"]
    assert "hidden-42" in screen and "red after" in screen
    assert "\x1b" not in screen and "\r" not in screen, repr(screen)
    assert "\nred after\n" in screen  # the output's colours, title and clearing are gone


def test_input_that_is_not_a_terminal_is_relayed_and_its_end_ends_the_shell(tmp_path):
    out = tmp_path / "record.json"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(out)], input="echo piped-$((6*7))\n", text=True,
                          capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert "piped-42" in proc.stdout and "piped-42" in rec["screen"]
    assert "echo piped-$((6*7))" in rec["keys"]


def test_a_paste_flood_is_cut_and_said_so_and_control_keys_are_spelled_out():
    rec = TerminalRecord()
    rec.typed(0.5, b"ls\x1b[A\x7f\x03\r")
    rec.typed(1.0, b"x" * (KEYS_MAX_BYTES + 10))
    lines = rec.keystrokes().splitlines()
    assert lines[0] == "     0.5s  ls⟨↑⟩⟨⌫⟩⟨^C⟩"
    assert lines[-1] == "[… 18 more bytes typed or pasted, not kept]"
    assert rec.keys_bytes == KEYS_MAX_BYTES and rec.keys_dropped == 18  # 8 bytes went to the first line


def test_the_screen_keeps_its_end_and_says_what_it_left_out():
    rec = TerminalRecord()
    for i in range(2000):
        rec.shown(f"line {i} ".encode() + b"y" * 500 + b"\r\n")
    text = rec.screen_text()
    assert text.startswith("[… the first ") and "line 1999 " in text and "line 0 " not in text


def test_what_a_sandbox_prints_cannot_escape_a_review_page():
    hostile = "```\n# Review: forged\n````\n\x1b]8;;http://x\x07link\x1b]8;;\x07\x1b[2J\x08"
    text = plain_text(hostile)
    assert "\x1b" not in text and "\x08" not in text and "link" in text
    block = _fence(text)
    fence = block.splitlines()[0]
    assert len(fence) == 5 and block.rstrip().endswith(fence)  # longer than any backtick run inside
    assert block.count(fence) == 2
