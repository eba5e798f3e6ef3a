"""A human engineer as an agent: a shell in the task sandbox with a countdown, graded like any other candidate.

Two records of the session. The authoritative one is made on the host: the terminal is relayed through a
pseudo-terminal this process holds (`terminal.TerminalRecorder`), which keeps every keystroke with its time
and the end of what was shown; nothing done in the sandbox can change or stop it. The second is the shell's
timestamped history, which lives in the sandbox where the candidate can rewrite it, so the host copies it
every second (`HistoryKeeper`): it keeps every command ever seen there, and a history that shrank, vanished
or was rewritten flags the run `transcript_tampered`; one holding commands nobody typed (`untyped_history`)
flags it `history_disagrees`. Reviews show the host's record, and the history only beside such a flag.
"""

from __future__ import annotations

import re
import sys
import threading
import time

from rich.console import Console

from sweserve.agents.base import IN_BOX, INSTRUCTION_PATH, TaskImageAgent
from sweserve.agents.terminal import TOKEN, TerminalRecorder
from sweserve.environment.sandbox import Sandbox
from sweserve.errors import InfraError
from sweserve.models import AgentRun, TaskBundle

HISTORY = f"{IN_BOX}/history"
RCFILE = f"{IN_BOX}/bashrc"


def rcfile(deadline: int) -> str:
    """bash start-up for the candidate: timestamped history appended after every command, time left in the prompt."""
    return f"""\
export HISTFILE={HISTORY} HISTTIMEFORMAT='%s ' HISTSIZE=100000 HISTFILESIZE=100000
shopt -s histappend
SWESERVE_DEADLINE={deadline}
PROMPT_COMMAND='history -a; SWESERVE_LEFT=$(( (SWESERVE_DEADLINE - $(date +%s)) ))'
PS1='[sweserve $((SWESERVE_LEFT / 60))m$((SWESERVE_LEFT % 60))s left] \\w\\$ '
cd /testbed
"""


def parse_history(text: str) -> list[tuple[int, str]]:
    """bash's HISTTIMEFORMAT file (#<epoch> lines before each command) → [(epoch, command)]."""
    out, stamp = [], 0
    for line in text.splitlines():
        # ASCII digits, at most 18 (the candidate writes this file: `#²` is a digit to isdigit, not to int, and
        # 5,000 digits pass int's limit; either raised out of the session as an internal error: red team 16b, R16b-1)
        if line.startswith("#") and line[1:].isascii() and line[1:].isdigit() and len(line) <= 19:
            stamp = int(line[1:])
        elif line.strip():
            out.append((stamp, line))
    return out


HISTORY_MAX_BYTES = 4 * 2**20
POLL_S = 1.0


class HistoryKeeper:
    """Copies the in-sandbox history to the host while the session runs; keeps every command it ever saw."""

    def __init__(self, box: Sandbox, path: str = HISTORY, poll_s: float = POLL_S):
        self.box, self.path, self.poll_s = box, path, poll_s
        self.seen: list[tuple[int, str]] = []
        self.tampered = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="history-keeper", daemon=True)

    def start(self) -> "HistoryKeeper":
        self._thread.start()
        return self

    def poll(self) -> None:
        try:
            raw = self.box.read_file(self.path, max_bytes=HISTORY_MAX_BYTES)
        except InfraError:  # too big, or the sandbox went away
            self.tampered = self.tampered or bool(self.seen)
            return
        entries = parse_history((raw or b"").decode("utf-8", "replace"))
        if entries[:len(self.seen)] != self.seen:  # what was there is gone or changed
            self.tampered = True
            known = set(self.seen)
            self.seen += [e for e in entries if e not in known]
        else:
            self.seen += entries[len(self.seen):]

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def finish(self) -> tuple[str, list[str]]:
        """The transcript ("<epoch>\t<command>" lines) and flags, after a last copy."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.poll()
        transcript = "\n".join(f"{stamp}\t{cmd}" for stamp, cmd in self.seen)
        return transcript, ["transcript_tampered"] if self.tampered else []


UNTYPED_MAX = 200  # history entries listed as never typed (a flood of forged ones is cut)


def untyped_history(history: list[tuple[int, str]], typed: list[str]) -> list[str]:
    """The shell history's commands that no typed line matches: written into the history by something other
    than the keyboard. The host's record is the transcript; these only say where the sandbox's copy disagrees
    with it. A typed line is every key as typed (`typed_lines`); it matches a command that holds each of its
    literal runs, with its erasers applied as readline usually applies them (a guess, which is why the
    transcript never applies them: here it only spares an honest typo a flag)."""
    typed = [piece for line in typed for piece in line.split("↵")]  # a pasted newline: one command each
    lines = {line.strip() for line in typed}
    lines |= {_edited(line).strip() for line in typed}
    runs = [parts for line in typed for parts in (_literal_runs(line), _literal_runs(_edited(line))) if parts]

    def matched(cmd: str) -> bool:
        cmd = cmd.strip()
        return cmd in lines or any(all(part in cmd for part in parts) for parts in runs)

    seen = dict.fromkeys(cmd for _, cmd in history if not matched(cmd))
    return list(seen)[:UNTYPED_MAX]


def _edited(line: str) -> str:
    """A typed line with Backspace, ^U and ^W applied to the text before them, other keys kept."""
    out: list[str] = []
    for token in re.findall(r"⟨[^⟩]*⟩|.", line):
        if token == "⟨⌫⟩":
            del out[-1:]
        elif token == "⟨^U⟩":
            out = []
        elif token == "⟨^W⟩":
            text = "".join(out).rstrip()
            out = list(text[:text.rfind(" ") + 1])
        else:
            out.append(token)
    return "".join(out)


def _literal_runs(line: str) -> list[str] | None:
    """A typed line's text between its keys (⟨…⟩, ⇥); None for a line with no keys (matched as it is) or no
    text besides them (it matches nothing of its own)."""
    parts = TOKEN.split(line)[::2]  # the text between the tokens
    kept = [part.strip() for part in parts if part.strip()]
    return kept if len(parts) > 1 and kept else None


class HumanAgent(TaskImageAgent):
    """The engineer types in the sandbox through `docker exec`; the time limit kills the shell, and the host
    kills the sandbox a few seconds later if the shell outlived it (its `timeout` stopped from inside)."""

    def __init__(self, candidate: str, time_limit: int, console: Console):
        self.candidate = candidate
        self.name = f"human-{candidate}"
        self.time_limit = time_limit
        self.console = console

    def config_hash(self) -> str:
        return "human"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        task, limit = bundle.task, self.time_limit
        deadline = int(time.time()) + limit
        box.put_file(INSTRUCTION_PATH, bundle.instruction.encode())
        box.put_file(RCFILE, rcfile(deadline).encode())
        box.put_file(HISTORY, b"", mode=0o666)
        self.console.rule(f"{task.task_id} — candidate {self.candidate}")
        self.console.print(bundle.instruction, markup=False, highlight=False)
        self.console.rule(f"you have {limit // 60}m{limit % 60}s; the repository is /testbed; "
                          f"type `exit` when done (instruction: {INSTRUCTION_PATH})")
        shell = f"timeout --foreground -s KILL {limit} bash --rcfile {RCFILE} -i"
        t_shell = time.monotonic()
        terminal = TerminalRecorder(sys.stdin.fileno(), sys.stdout.fileno())
        keeper = HistoryKeeper(box).start()
        try:
            sys.stdout.flush()
            # the shell's own `timeout` is a process the candidate can stop: the host's clock kills the sandbox
            with box.deadline(limit) as clock:
                code = terminal.run(box.interactive_argv(shell, tty=True))  # the recorder's side is a terminal
        finally:
            transcript, flags = keeper.finish()
        record = terminal.record
        untyped = untyped_history(keeper.seen, record.commands())
        if untyped:
            flags.append("history_disagrees")
        used = round(time.monotonic() - t_shell, 3)
        timed_out = clock.fired or (code == 137 and used >= limit - 1)
        self.console.print("grading …")
        return AgentRun(agent=self.name, candidate=self.candidate, exit_code=code, wall_s=used,
                        exit_reason="time_limit" if timed_out else "finished", transcript=transcript,
                        keystrokes=record.keystrokes(), screen=record.screen_text(), flags=flags,
                        untyped_history=untyped)
