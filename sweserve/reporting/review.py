"""Reviewer reports: instruction, candidate diff beside the oracle diff, test results, the scan's flags and, for a
human session, the transcript recorded on the host (the in-sandbox shell history only when it disagrees)."""

from __future__ import annotations

import html
import re
from datetime import datetime, timezone

from sweserve.models import AgentRun, RunResult, TaskBundle

ICON = {"passed": "✅", "failed": "❌", "error": "⚠️", "skipped": "⏭️", "missing": "∅"}


def _fence(text: str, lang: str = "") -> str:
    """A code block no backtick run in text can close (diffs and terminals are the candidate's words)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def review_markdown(bundle: TaskBundle, result: RunResult) -> str:
    run = result.agent_run
    who = run.candidate if run and run.candidate else result.agent
    lines = [
        f"# Review: {bundle.task.task_id} — {who}",
        "",
        "| | |", "|---|---|",
        f"| task | {bundle.task.task_id} ({bundle.task.family}), PR #{bundle.task.pr_number} |",
        f"| candidate | {who} |",
        f"| status | **{result.status}**{f' — {result.reason}' if result.reason else ''} |",
        f"| time used | {run.wall_s if run else result.duration_s:.0f} s ({run.exit_reason if run else 'n/a'}) |",
        f"| finished | {result.finished_at.astimezone(timezone.utc):%Y-%m-%d %H:%M UTC} |",
        "",
        "## Instruction", "", bundle.instruction.strip(), "",
        "## Hidden tests", "", "| test | kind | outcome |", "|---|---|---|",
    ]
    for kind, outcomes in (("FAIL_TO_PASS", result.tests.fail_to_pass), ("PASS_TO_PASS", result.tests.pass_to_pass)):
        for test_id, outcome in outcomes.items():
            lines.append(f"| `{test_id}` | {kind} | {ICON.get(outcome, '')} {outcome} |")
    lines += ["", "## Verifier", "", "The tamper scan's flags say where to look; no grade depends on them.", ""]
    lines += [f"- flagged: {flag}" for flag in result.flags] or ["- the tamper scan flagged nothing"]
    lines += [f"- reset to base: {reset}" for reset in result.resets]
    lines += ["", "## Candidate diff", "", _fence(result.model_patch or "(no changes)", "diff"),
              "## Oracle diff", "", _fence(bundle.oracle_patch, "diff")]
    if run:
        lines += _session(run)
    return "\n".join(lines) + "\n"


HISTORY_FLAGS = ("transcript_tampered", "history_disagrees")


def _session(run: AgentRun) -> list[str]:
    """A human session's record: what the host recorded (keystrokes, screen); the shell history from inside
    the sandbox only when a flag says it disagrees with that record, marked as the candidate's to write."""
    lines: list[str] = []
    if run.keystrokes:
        lines += ["## Transcript", "", ("What was typed, recorded on the host (seconds since the session "
                                        "started): the record of the session; nothing done in the sandbox can "
                                        "change it."), "", _fence(run.keystrokes, "text")]
    if run.screen:
        lines += ["## Terminal", "", "The end of what the terminal showed, recorded on the host.", "",
                  _fence(run.screen, "text")]
    flagged = [f for f in run.flags if f in HISTORY_FLAGS]
    if run.transcript and flagged:
        untyped = set(run.untyped_history)
        rows = []
        for line in run.transcript.splitlines():
            stamp, _, cmd = line.partition("\t")
            when = datetime.fromtimestamp(int(stamp), timezone.utc).strftime("%H:%M:%S") if stamp.isdigit() else ""
            rows.append(f"{'!' if cmd in untyped else ' '} {when}  {cmd}")
        lines += ["## Shell history (from inside the sandbox: ⚠ disagrees with the host's record)", "",
                  (f"Flagged {', '.join(flagged)}. The candidate can write this history, so it is not the "
                   "record; lines marked ! were never typed in the host's record (forged, or finished by "
                   "completion or history recall)."), "", _fence("\n".join(rows), "console")]
    return lines


def review_html(bundle: TaskBundle, result: RunResult) -> str:
    """The Markdown report in a self-contained page (pre-formatted: no renderer needed)."""
    body = html.escape(review_markdown(bundle, result))
    return (f"<!doctype html><meta charset='utf-8'><title>Review {html.escape(bundle.task.task_id)}</title>"
            f"<style>body{{font-family:sans-serif;margin:2em}}pre{{white-space:pre-wrap}}</style>"
            f"<pre>{body}</pre>\n")
