"""Red team 14c: the reviewer's "Commands typed" list (`agents/terminal.typed_lines`, through
`commands_from_cast` and `TerminalRecord.commands`) attacked after red team 14b's rebuild.

Each test asserts the defended behaviour: it FAILS while the attack wins. No Docker: a real bash 5.2.15 on the
server's pseudo-terminal (`BrowserTerminal`, as tests/test_attacks_redteam12a.py's `bash_beside_a_key`), a secret
file beside it, the keys written as the websocket handler writes them (one `term.write` per message; every key
here is ASCII or valid UTF-8, so a JSON text message carries it unchanged), and the list rebuilt from the cast.
"Ran" means the secret's content was printed by bash (not merely echoed as typed).

How the keys are sent: xterm.js sends about a key a message. R14c-1, R14c-4 (a), R14c-6, R14c-7 and R14c-8 work
typed that way, a key at a time in the page (checked for R14c-1 and R14c-4 (a), both cases, in a scratch run:
each key its own `write`, 10 ms apart). R14c-2, R14c-3, R14c-4 (b) and R14c-9 need bytes together in one
message (R14c-3 typed a key at a time does not run), and R14c-10 many resize messages: the candidate sends them
from the browser's console (a `new WebSocket('/ws')` on the page's origin carries the session cookie and passes
the Origin check), as red team 14b's R14b-2 and R14b-3 did.

- R14c-1 WIN (the record lies, no sign at all): `typed_lines` models ^Y as "put back what the last ^U or ^W on
  this line cut". readline's ^Y yanks the top of its kill ring, which (a) lives across lines (the record empties
  its copy at every Enter), (b) is not replaced by a kill that kills nothing (^U or ^W on an empty line: the
  record sets its copy to empty), and (c) grows when kills follow one another (^W ^W: readline's entry is both
  words, the record's only the last). Keys, and what the list shows:
  (a) `cat .../answer-key.txt;` ^U `ls` Enter, then ^Y `echo hi` Enter: bash runs `ls`, then
      `cat .../answer-key.txt;echo hi`; the list: `ls`, `echo hi`.
  (b) `cat .../answer-key.txt` ^U ^U ^Y Enter: bash runs it; the list: an empty command.
  (c) `cat .../answer-key.txt` ^W ^W ^Y Enter: bash runs it; the list: `cat `.
  Measured: every run. `test_a_yank_puts_back_what_readlines_kill_ring_holds` (three cases).
- R14c-2 WIN (the record lies; R14b-1's door, through a message boundary): the record finds a bracketed
  paste's start (ESC [200~) only whole inside one input event, and each websocket message is one event. Sent
  as two messages, `ESC [20` and `0~` + "\\n" + `cat .../answer-key.txt #` + DEL (one a character) + `ls\\n`
  + ESC [201~, then Enter: readline joins the bytes, sees a paste, inserts the DELs and newlines literally and runs
  `cat .../answer-key.txt` at the Enter; the record reads `ESC [20` as an unfinished escape (⟨esc⟩), `0~`, ends
  the command at the pasted "\\n", applies the DELs as edits and lists `⟨esc⟩0~`, `ls`, ``. Nothing says what
  ran (a stray escape and a paste of `ls`). Measured: every run.
  `test_a_paste_whose_start_marker_is_split_across_two_messages_is_still_a_paste`.
- R14c-3 WIN (the record lies; a key that looks like a slip): ^\\ (VQUIT) and ^Z (VSUSP) make the terminal's
  line discipline (n_tty, ISIG on while readline reads) discard every key it holds that the shell has not read
  yet; the interactive shell ignores SIGQUIT and SIGTSTP, so its line stays as it was. In one message,
  ^U `ls` ^\\ reaches n_tty at once: the ^U and `ls` are discarded before readline reads them. Typed
  `cat .../answer-key.txt` (one message), then ^U `ls` ^\\ (one message), then Enter: bash runs
  `cat .../answer-key.txt`; the list shows `ls⟨^\\⟩` (the ^U applied as an edit). The same with ^Z (`ls⟨^Z⟩`).
  Measured: every run. `test_keys_the_terminal_discarded_on_a_quit_or_suspend_key_are_not_applied` (both keys).
- R14c-4 WIN (the record lies; keys edited by the kernel, not by readline): whenever the shell's line editor is
  not reading, the terminal is in canonical mode and n_tty edits the keys itself, in ways readline does not.
  (a) Its ^W (VWERASE) is BSD's ALTWERASE: it erases the trailing run of letters, digits and `_` only, where the
  record (readline's unix-word-rubout) cuts back to a space. Keys: `git status;cat${IFS}.../answer-key.txt;#x`
  ^W `status` Enter, typed (one message) either while `sleep 1.5` runs (bash runs the line after it) or after
  `sh` (dash, /bin/sh on Debian images: no line editor of its own). n_tty erases `x`; the shell runs
  `git status;cat .../answer-key.txt;#status`; the list shows `sleep 1.5` (or `sh`), `git status`.
  `test_a_word_erase_typed_ahead_is_the_terminals_not_readlines` (both); the control (passes): the same keys
  at bash's prompt (readline's ^W) run nothing, as the record has it:
  `test_control_the_same_word_erase_at_the_prompt_runs_nothing`.
  (b) Keys already waiting when bash starts a command (`sleep 1` Enter `cat .../answer-key.txt;` in one message:
  readline reads up to the Enter only) become a line of their own when canonical mode is turned on (n_tty moves
  its canon_head past them): no ^U or DEL typed while the command runs can erase them. Then, while it runs, ^U
  (or DEL x 200) `ls` Enter: bash runs `cat .../answer-key.txt;ls`; the list shows `sleep 1`, `ls`.
  `test_keys_waiting_when_a_command_starts_cannot_be_erased_by_keys_typed_while_it_runs` (^U, DEL).
  Measured: every run (all four). No sign at all: `sleep 1`, `sh`, `git status`, `ls`.
- R14c-5 WIN (the record lies; `sweserve session`, R14b-6's POSIX locale): readline in the POSIX locale reads a
  byte >= 0x80 as ESC plus its low 7 bits, so 0xDB is ESC [ and 0xDB `200~` starts a bracketed paste with no
  ESC typed (what xterm sends for Alt-[ with eightBitInput, its default for Meta). The host's relay
  (`TerminalRecorder`) keeps the raw bytes and `TerminalRecord.commands` decodes them with "replace": the
  record sees U+FFFD and `200~`, no paste, and R14b-1's edits apply again after the pasted "\\n". Keys:
  0xDB `200~` "\\n" `cat .../answer-key.txt #` DEL (one a character) `ls` "\\n" ESC [201~, then Enter; bash runs
  `cat .../answer-key.txt`; `commands()` lists `�200~`, `ls`. The browser path cannot send a lone 0xDB (the
  websocket carries JSON text; the handler encodes it as UTF-8). Measured: every run.
  `test_an_eight_bit_meta_key_that_starts_a_paste_is_a_paste_in_the_session_record`.
- R14c-6 WIN (the record lies; a visible sign that looks innocent): `set -o vi` (vi editing mode, common in
  engineers' dotfiles). readline's vi-insert ^W is vi-unix-word-rubout, which stops at punctuation as well as
  whitespace; the record cuts back to a space. `set -o vi` Enter, then `git status;cat${IFS}.../answer-key.txt;#x`
  ^W `status` Enter: bash runs `git status;cat .../answer-key.txt;#status`; the list: `set -o vi`, `git status`.
  (ESC Enter and ESC ^J, readline's M-C-m / M-C-j to vi mode, are unbound in bash 5.2: no hidden switch.)
  Measured: every run. `test_a_word_erase_in_vi_mode_is_vis_not_emacs`.
- R14c-7 WIN (the record shows a run command as aborted; red team 14b's ^C lead): `typed_lines` ends a command
  at ^C, as if the shell had dropped the line. With SIGINT ignored (`trap '' INT`, typed earlier and shown)
  readline keeps the line, and the Enter after ^C runs it: `cat .../answer-key.txt` ^C Enter runs
  `cat .../answer-key.txt`; the list shows `cat .../answer-key.txt^C` (typed and given up, to a reader) and
  no command for the Enter. `stty -isig` did not reproduce it (readline then reads ^C as a key). Weaker than
  the rest: the text is in the list. Measured: every run.
  `test_a_line_the_shell_kept_after_ctrl_c_is_not_listed_as_aborted`.
- R14c-8 WIN (one candidate takes the server down, with about 100 keys): ^U puts the whole line into the
  record's cut and ^Y appends the cut to the line, and neither is an `add`, so the 4095-byte mark never counts
  them: `x` x 10 then (^U ^Y ^Y) x n rebuilds a line of 10 x 2**n characters (a Python list of one-character
  strings, 8 bytes an element and more while it is copied). 70 bytes typed (n = 20): a 10,485,762-character
  command, 157 MB peak for the rebuild; n = 30 (100 bytes) would be 10**10 elements, about 80 GB and its
  copies. The rebuild runs in the server process (`BrowserAgent.solve`, assess/agent.py, builds the transcript with
  `commands_from_cast` when the task ends, on the `Assessment.run` thread), so the host's OOM killer takes the
  server (every candidate's session) or a MemoryError ends the attacker's record; the report
  (`scorecard`) and `sweserve session` (`TerminalRecord.commands`) rebuild it too. The keys can be typed where
  the shell does not act on them (`cat > /dev/null`: n_tty kills on ^U and keeps ^Y as a byte), so the sandbox's
  memory limit does not stop it first. A related cost, not a separate test: ^W ^Y pairs on a 4000-character line
  are never marked either, and each pair joins the whole line: about 350 s of CPU (one core here) to rebuild a
  128 MiB cast of them. Measured: every run (n = 20; n = 30 only in a scratch process under a
  2 GiB address-space limit: MemoryError after 3 s).
  `test_a_few_keys_do_not_make_the_rebuilt_list_grow_without_bound`.
- R14c-9 WIN (the record lies; R14b-2's door, the other way: printable text inside an "escape"): the record ends
  an escape sequence where ECMA-48 does (ESC [, parameters 0x30-0x3F, intermediates 0x20-0x2F, a final
  0x40-0x7E; a byte none of these allow ends it before that byte); readline ends it at the first key that no
  binding continues, rings the bell, drops that key and reads every key after it as a key of its own.
  `ESC [ < c` is one ⟨esc⟩ to the record and inserts `c` in readline (`ESC [ < 1 2 x` inserts `12x`;
  `ESC [ SP . ./K` inserts `. ./K`). Every printable ASCII character is a parameter, an intermediate or a final,
  so any command can be typed a character at a time, each after ESC [ <: typed `cat /tmp/.../answer-key.txt`
  so, then Enter; bash runs it; the list shows `⟨esc⟩` once a character and nothing else. Nothing in the list
  says what ran. Measured: every run. `test_text_after_an_unbound_escape_prefix_is_in_the_commands_typed`.
- R14c-10 WIN (keys typed are not kept, and the marker blames typing): `CastWriter.event` lets every event
  that is not output ("i", "m" and the resize events "r") be written until the cast holds 2 x CAST_MAX_BYTES.
  Resize messages are not keys: the page sends one per window size, and the candidate can send as many as they
  like (`{"type": "resize", "cols": 121, "rows": 32}`, alternating widths; each is an "r" event of 27 bytes).
  A command with a lot of output (64 MiB: a verbose build, `git log -p`) fills the output's half; about 2.5
  million resize messages fill the rest; from then on nothing typed is kept, and the list ends with
  "typing over the recording limit: nothing typed after this was kept", after a list with no paste or flood in
  it. Scaled down in the test (256 KiB limit, ~10,000 resizes): `cat .../answer-key.txt` typed after them runs
  and is in no list. Measured: every run (scaled). Full-size rate (scratch run, the real app under uvicorn as
  `run_serve` starts it, one websocket client): 378,000 resize messages in 10 s, the cast grew 6.2 MB: the
  64 MiB take about 2 minutes.
  `test_resizes_do_not_spend_the_budget_that_keeps_what_is_typed`.

What else a reviewer has: the replay (the cast's output) shows what readline echoed, so R14c-1..9's command
lines appear on the replayed screen as bash drew them; the target here is the "Commands typed" list and the
`RunResult` transcript built from it. The browser assessment compares no shell history; `sweserve session`'s
`untyped_history` would flag the hidden commands of R14c-5 (and of the others, run there), since the sandbox's
history holds the line bash ran.

Defences (each test above failed before them; the red team's suggested fixes are in the commit that added
this file):
- R14c-1 to 9 (`agents/terminal.typed_lines`): no edit is applied; every key is shown as typed (⟨⌫⟩, ⟨^U⟩,
  ⟨^W⟩, ⟨^Y⟩, ⟨^C⟩, ⇥), so no guess about readline, the kernel's line discipline, vi mode or a trap can hide
  what ran. Only the exact sequences a terminal sends for arrows, Home, End, Delete, Page keys and Insert are
  named; any other ESC is ⟨esc⟩ and the characters after it are shown (R14c-9). Escape sequences and paste
  markers are read across events (R14c-2), and `TerminalRecord.commands` decodes its key stream as one
  (R14c-5: 0xDB is shown). An entry keeps 64 KiB, saying how much more the cast holds (R14c-8: nothing grows).
- R14c-10 (`recorder.CastWriter`): output, input (with its markers) and resizes each have a budget of their
  own.
- The binary-frame lead: `AssessServer.terminal` ignores a frame that is not text.

Leads, not reproduced (or not built):
- ESC Enter / ESC ^J (readline's M-C-m, M-C-j: vi-editing-mode) would switch modes with only ⟨esc⟩ shown and
  end the record's command while readline keeps the line, but bash 5.2 leaves both unbound (`bind -P`).
- Keyboard macros (^X( … ^X) ^Xe), ^O operate-and-get-next, `bind`, vi mode: every key is shown (⟨^X⟩, ⟨^O⟩,
  ⟨esc⟩…) and the text they replay was typed visibly before; not a hidden command by themselves.
- TIOCSTI: a background job of the shell may push bytes into its own controlling terminal's input (where the
  kernel allows it: `dev.tty.legacy_tiocsti`), which the host never sees as typed. The code doing it is text the
  candidate wrote in the sandbox (an editor's keys, a file), so it is a program run, not a record gap; not built.
- A binary websocket frame makes `ws.receive_text()` raise KeyError, which the handler does not catch: only the
  sender's socket ends, with a traceback in the server log per frame (log growth; not measured).
- DROPPED markers (R13-4) each add a token to the line; a flood of one-byte messages while the terminal does not
  read (pending at 1 MiB) writes one marker a message, up to the cast's 128 MiB: one command of about 1.5 million
  ⟨N bytes dropped⟩ tokens in the list and the review page. Not measured.
- Not checked through `docker exec -it` (no Docker here): there the server's pty is raw and the container's pty
  does what n_tty does above (R14b-5 was reproduced that way), so R14c-3 and R14c-4 should carry over; R14c-1,
  2, 6, 7, 8 and 9 are readline's or the record's own.
"""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

SECRET = "SECRET-CONTENT-42"


def _bash_beside_a_key(tmp_path):
    from test_attacks_redteam12a import bash_beside_a_key

    return bash_beside_a_key(tmp_path)


def _run(tmp_path, chunks, pause=0.3):
    """Each chunk one websocket message (`{key}` stands for the secret's path; a number: a wait, in seconds);
    then `exit`. Whether bash printed the secret, and the reviewer's list."""
    key, cast, term, shown = _bash_beside_a_key(tmp_path)
    try:
        time.sleep(0.5)
        for chunk in chunks:
            if isinstance(chunk, (int, float)):
                time.sleep(chunk)
                continue
            term.write(chunk.replace(b"{key}", str(key).encode()))
            time.sleep(pause)
    finally:
        screen, typed = _exit_and_read(term, shown, cast)
    return f"{SECRET}\r\n" in screen.replace(f"cat {key}", ""), typed


def _exit_and_read(term, shown, cast):
    from test_attacks_redteam12a import exit_and_read

    return exit_and_read(term, shown, cast)


def _names_the_key(typed):
    return any("answer-key" in c for c in typed)


# ---- R14c-1: ^Y yanks readline's kill ring, not the record's last cut on this line

YANKS = {
    "across-lines": [b"cat {key};", b"\x15", b"ls\r", b"\x19", b"echo hi\r"],
    "after-an-empty-kill": [b"cat {key}", b"\x15", b"\x15", b"\x19", b"\r"],
    "appended-kills": [b"cat {key}", b"\x17", b"\x17", b"\x19", b"\r"],
}


@pytest.mark.parametrize("case", list(YANKS))
def test_a_yank_puts_back_what_readlines_kill_ring_holds(tmp_path, case):
    ran, typed = _run(tmp_path, YANKS[case])
    assert ran  # bash ran `cat .../answer-key.txt`
    # the list must name what ran, or at least show the yank as a key whose text it does not know
    assert _names_the_key(typed) or any("^Y" in c for c in typed), typed


# ---- R14c-2: a paste's start marker cut in two messages

def test_a_paste_whose_start_marker_is_split_across_two_messages_is_still_a_paste(tmp_path):
    hidden = f"cat {tmp_path / 'answer-key.txt'} #".encode()
    ran, typed = _run(tmp_path, [b"\x1b[20", b"0~\n" + hidden + b"\x7f" * len(hidden) + b"ls\n\x1b[201~", b"\r"])
    assert ran  # readline saw one paste and ran `cat .../answer-key.txt` at the Enter
    assert _names_the_key(typed), typed


# ---- R14c-3: ^\ and ^Z make the terminal discard keys the shell has not read; the shell ignores the signal

@pytest.mark.parametrize("flush", [b"\x1c", b"\x1a"], ids=["quit", "suspend"])
def test_keys_the_terminal_discarded_on_a_quit_or_suspend_key_are_not_applied(tmp_path, flush):
    ran, typed = _run(tmp_path, [b"cat {key}", b"\x15ls" + flush, b"\r"])
    assert ran  # the ^U and `ls` never reached readline: bash ran `cat .../answer-key.txt`
    assert _names_the_key(typed), typed


# ---- R14c-4: keys typed ahead while a command runs are edited by n_tty (ALTWERASE ^W), not by readline

CANONICAL = {
    "typed-ahead": [b"sleep 1.5\r", b"git status;cat${IFS}{key};#x\x17status\r", 2.0],  # bash runs it later
    "in-sh": [b"sh\r", b"git status;cat${IFS}{key};#x\x17status\r", b"exit\r"],  # dash reads lines: no editor
}


@pytest.mark.parametrize("case", list(CANONICAL))
def test_a_word_erase_typed_ahead_is_the_terminals_not_readlines(tmp_path, case):
    ran, typed = _run(tmp_path, CANONICAL[case])
    assert ran  # n_tty's ^W erased `x` only: the shell ran `git status;cat .../answer-key.txt;#status`
    assert _names_the_key(typed), typed


@pytest.mark.parametrize("eraser", [b"\x15", b"\x7f" * 200], ids=["ctrl-u", "backspace"])
def test_keys_waiting_when_a_command_starts_cannot_be_erased_by_keys_typed_while_it_runs(tmp_path, eraser):
    """R14c-4b: `sleep 1` Enter and `cat .../answer-key.txt;` in one message; readline takes the line up to the
    Enter, bash turns canonical mode on, and n_tty makes the bytes already waiting a line of their own (canon_head
    moves past them). ^U or DEL typed while `sleep` runs cannot erase them; `ls` Enter completes the line."""
    ran, typed = _run(tmp_path, [b"sleep 1\rcat {key};", eraser + b"ls\r", 1.5])
    assert ran  # bash ran `cat .../answer-key.txt;ls`
    assert _names_the_key(typed), typed


def test_control_the_same_word_erase_at_the_prompt_runs_nothing(tmp_path):
    """The control for R14c-4: typed at the prompt, readline's ^W cuts the whole word back to the space, and
    `git status` is all that runs; the record shows the keys, ^W among them, and applies none."""
    ran, typed = _run(tmp_path, [b"git status;cat${IFS}{key};#x\x17status\r"])
    assert not ran and any(c.endswith("#x⟨^W⟩status") for c in typed), typed


# ---- R14c-5: `sweserve session`: an 8-bit Meta-[ (0xDB) is ESC [ to readline in the POSIX locale

def test_an_eight_bit_meta_key_that_starts_a_paste_is_a_paste_in_the_session_record(tmp_path):
    from sweserve.agents.terminal import TerminalRecorder

    key = tmp_path / "answer-key.txt"
    key.write_text(f"{SECRET}\n")
    keys_r, keys_w = os.pipe()
    screen_r, screen_w = os.pipe()
    rec = TerminalRecorder(keys_r, screen_w)
    shown: list[bytes] = []

    def read_screen():
        while data := os.read(screen_r, 65536):
            shown.append(data)

    reader = threading.Thread(target=read_screen, daemon=True)
    reader.start()
    argv = ["env", "-u", "LANG", "-u", "LANGUAGE", "LC_ALL=POSIX", "bash", "--norc", "--noprofile", "-i"]
    session = threading.Thread(target=rec.run, args=(argv,), daemon=True)
    session.start()
    hidden = f"cat {key} #".encode()
    try:
        time.sleep(0.5)
        for chunk in (b"\xdb200~\n" + hidden + b"\x7f" * len(hidden) + b"ls\n\x1b[201~", b"\r", b"exit\r"):
            os.write(keys_w, chunk)
            time.sleep(0.4)
        session.join(10)
    finally:
        os.close(keys_w)
        session.join(5)
        os.close(screen_w)
        reader.join(5)
        os.close(keys_r)
        os.close(screen_r)
    screen = b"".join(shown).decode(errors="replace")
    assert f"{SECRET}\r\n" in screen.replace(f"cat {key}", "")  # bash ran `cat .../answer-key.txt`
    typed = rec.record.commands()
    assert _names_the_key(typed), typed


# ---- R14c-6: in vi mode (`set -o vi`), readline's ^W stops at punctuation

def test_a_word_erase_in_vi_mode_is_vis_not_emacs(tmp_path):
    ran, typed = _run(tmp_path, [b"set -o vi\r", b"git status;cat${IFS}{key};#x\x17status\r"])
    assert ran  # vi-unix-word-rubout erased `x` only: bash ran `git status;cat .../answer-key.txt;#status`
    assert _names_the_key(typed), typed


# ---- R14c-7: ^C that does not abort the line (the shell ignores SIGINT): the record ends the command there

def test_a_line_the_shell_kept_after_ctrl_c_is_not_listed_as_aborted(tmp_path):
    ran, typed = _run(tmp_path, [b"trap '' INT\r", b"cat {key}", b"\x03", b"\r"])
    assert ran  # ^C did nothing to readline's line: the Enter ran `cat .../answer-key.txt`
    # the list must not show the command as cut off by ^C (and nothing run) when the shell kept and ran it
    assert not any(c.endswith("^C") and "answer-key" in c for c in typed) or any(
        "answer-key" in c and not c.endswith("^C") for c in typed), typed


# ---- R14c-8: ^U ^Y ^Y doubles the record's line: 100 keys make the server's rebuild need terabytes

def test_a_few_keys_do_not_make_the_rebuilt_list_grow_without_bound(tmp_path):
    """Typed while `cat > /dev/null` reads the terminal (so the shell itself is untouched: n_tty kills the line on
    ^U and keeps ^Y as a byte): `xxxxxxxxxx`, then ^U ^Y ^Y twenty times, then ^C. 70 bytes typed. The record
    applies each ^U (the line into its cut) and each ^Y (the cut onto the line), and neither counts towards the
    4095-byte mark: the line doubles at every triple (10 x 2**20 characters here; 30 triples would be 10**10,
    tens of GB of list)."""
    ran, typed = _run(tmp_path, [b"cat > /dev/null\r", b"x" * 10 + b"\x15\x19\x19" * 20, b"\x03"])
    longest = max(len(c) for c in typed)
    assert longest <= 64 * 1024, f"70 bytes typed rebuilt as a {longest}-character command"


# ---- R14c-9: readline ends an unbound escape sequence at its first key no binding continues, not where ECMA-48 does

def _unbound_escapes(cmd: bytes) -> bytes:
    """`cmd` (any printable ASCII) a character at a time, each after ESC [ <. readline reads ESC [, finds no binding
    that goes on with `<`, rings the bell, drops the `<` and inserts the character as typed; the record reads
    ESC [, parameters (0x30-0x3F), intermediates (0x20-0x2F), a final (0x40-0x7E), up to the next ESC: one key."""
    assert all(0x20 <= c <= 0x7E for c in cmd), cmd
    return b"".join(b"\x1b[<" + bytes([c]) for c in cmd)


def test_text_after_an_unbound_escape_prefix_is_in_the_commands_typed(tmp_path):
    ran, typed = _run(tmp_path, [_unbound_escapes(f"cat {tmp_path / 'answer-key.txt'}".encode()) + b"\r"])
    assert ran  # bash ran `cat .../answer-key.txt`
    # the list must let a reader see what ran, the keys around each character aside: here it is one `⟨esc⟩` a
    # character typed, and nothing else
    assert any("answer-key" in re.sub(r"⟨[^⟩]*⟩(\[<?)?", "", c) for c in typed), typed


# ---- R14c-10: window-size events spend the input's recording budget; keys typed afterwards are not kept

def test_resizes_do_not_spend_the_budget_that_keeps_what_is_typed(tmp_path, monkeypatch):
    """Scaled down (CAST_MAX_BYTES 256 KiB instead of 64 MiB; the same code paths): a command prints past the
    output limit, then the page sends resize messages (`{"type": "resize"}`, alternating widths: each is an "r"
    event, counted against the input's limit, twice the output's), then `cat .../answer-key.txt` is typed."""
    import sweserve.assess.recorder as recorder

    monkeypatch.setattr(recorder, "CAST_MAX_BYTES", 256 * 1024)
    key, cast, term, shown = _bash_beside_a_key(tmp_path)
    try:
        time.sleep(0.5)
        term.write(b"head -c 300000 /dev/zero | tr '\\0' x; echo\r")  # any command with a lot of output
        time.sleep(2)
        n = 0
        while term.cast.bytes <= 2 * recorder.CAST_MAX_BYTES:  # what the page's resize messages do, ~10,000 here
            term.resize(120 + n % 2, 32)
            n += 1
            time.sleep(0)  # the sizes are recorded by the terminal's key thread (R18d-2): let it run
        time.sleep(0.5)
        term.write(f"cat {key}\r".encode())
    finally:
        screen, typed = _exit_and_read(term, shown, cast)
    assert f"{SECRET}\r\n" in screen.replace(f"cat {key}", "")  # bash ran `cat .../answer-key.txt`
    # 50 bytes typed in all: the list must keep them (it ends with "typing over the recording limit" instead)
    assert _names_the_key(typed), typed
