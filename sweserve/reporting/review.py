"""Reviewer reports: instruction, candidate diff beside the oracle diff, test results, the scan's flags, the agent's
trajectory and, for a human session, the transcript recorded on the host (the in-sandbox shell history only when
it disagrees)."""

from __future__ import annotations

import html
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from sweserve.loading import read_found_text
from sweserve.models import (
    CLOSE_MARK,
    OPEN_MARK,
    TRAJECTORY_STEPS_FILE,
    AgentRun,
    RunResult,
    TaskBundle,
    TrajectoryStep,
)

MAX_STEPS_SHOWN = 500  # of an agent's trajectory on its reviewer page (the agent writes it: it may be huge)
ICON = {"passed": "✅", "failed": "❌", "error": "⚠️", "skipped": "⏭️", "missing": "∅"}


# what a terminal acts on (C0/C1 controls but tab and line feed; a CR before LF is a line end) and what reorders or
# hides text where it is shown (bidi embeddings, overrides and isolates, marks, zero-width characters)
# hides text where it is shown: every format character (Cf: bidi controls and marks, ALM included, zero-width
# characters, the soft hyphen, TAG characters U+E0000..7F), every default-ignorable code point (variation selectors,
# Hangul fillers, which Python takes in an identifier, the combining grapheme joiner) and the line and paragraph
# separators; an emoji's presentation selector (U+FE0E/F after a symbol or pictograph) is kept, as sweserve's own
# icons use it. Fourteen of these were spelled before, and the others hid a string's tail as the zero-width space
# had (red team 15g, R15g-2)
_EMOJI_BASE = "\u00a9\u00ae\u2000-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
_UNSEEN = re.compile(
    r"\r(?!\n)|(?<![" + _EMOJI_BASE + r"])[\ufe0e\ufe0f]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f"
    r"\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    r"\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd"
    r"\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


# who counted a run's tokens (`AgentRun.usage_from`), as a reviewer reads it
USAGE_FROM = {"host": " (counted by sweserve)", "proxy": " (metered by its egress proxy from the model's answers)",
              "agent": " (the agent's own record, written in its sandbox)"}


def visible_controls(text: str) -> str:
    """Text as a reviewer may read it on a terminal or a page: each control character, bidi control and invisible
    character spelled by its code point (`<U+001B>`), so a candidate's file or a mined statement can neither
    drive the reviewer's terminal nor show code other than what runs (red team 15b, R15b-1..3)."""
    return _UNSEEN.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


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
    # printed to a terminal (`sweserve review`): the candidate's files and history, and the mined statement,
    # carry no escape sequence, carriage return or bidi control to it (red team 15b, R15b-1)
    return visible_controls("\n".join(lines) + "\n")


HISTORY_FLAGS = ("transcript_tampered", "history_disagrees")


def _clock(stamp: str) -> str:
    """A history line's stamp as a time of day; a stamp that is no time (the candidate writes the history: year
    3170843 raised ValueError, 18 digits OSError, and no page was written: red team 23h, R23h-8) as it is."""
    if not (stamp.isascii() and stamp.isdigit()):
        return ""
    try:
        return datetime.fromtimestamp(int(stamp), timezone.utc).strftime("%H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return f"#{stamp}"


def _history(run: AgentRun) -> tuple[list[str], str]:
    """(the flags that say the in-sandbox shell history disagrees with the host's record, the history's lines
    with the time and a ! on each line nobody typed); no flag: none shown."""
    flagged = [f for f in run.flags if f in HISTORY_FLAGS]
    if not (run.transcript and flagged):
        return [], ""
    untyped = set(run.untyped_history)
    rows = []
    for line in run.transcript.splitlines():
        stamp, _, cmd = line.partition("\t")
        when = _clock(stamp)
        rows.append(f"{'!' if cmd in untyped else ' '} {when}  {cmd}")
    return flagged, "\n".join(rows)


HISTORY_NOTE = ("The candidate can write this history, so it is not the record; lines marked ! were never typed in "
                "the host's record (forged, or finished by completion or history recall).")
TRANSCRIPT_NOTE = ("What was typed, recorded on the host (seconds since the session started): the record of the "
                   "session; nothing done in the sandbox can change it.")


def _session(run: AgentRun) -> list[str]:
    """A human session's record: what the host recorded (keystrokes, screen); the shell history from inside
    the sandbox only when a flag says it disagrees with that record, marked as the candidate's to write."""
    lines: list[str] = []
    if run.keystrokes:
        lines += ["## Transcript", "", TRANSCRIPT_NOTE, "", _fence(run.keystrokes, "text")]
    if run.screen:
        lines += ["## Terminal", "", "The end of what the terminal showed, recorded on the host.", "",
                  _fence(run.screen, "text")]
    flagged, history = _history(run)
    if flagged:
        lines += ["## Shell history (from inside the sandbox: ⚠ disagrees with the host's record)", "",
                  f"Flagged {', '.join(flagged)}. {HISTORY_NOTE}", "", _fence(history, "console")]
    return lines


REVIEW_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px 32px;color:#1f2328}
h1{margin:0 0 4px;font-size:24px} h2{margin-top:28px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
nav a{color:#0969da} table{border-collapse:collapse;font-size:14px}
th,td{border:1px solid #d0d7de;padding:4px 10px;text-align:left;vertical-align:top} th{background:#f6f8fa}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
pre{white-space:pre-wrap;word-break:break-word;margin:0}
.instruction{max-width:980px;border:1px solid #d0d7de;border-radius:6px;padding:4px 16px;background:#fcfcfd}
.diffs{display:grid;grid-template-columns:1fr 1fr;gap:12px} .diffs>div{min-width:0}
.diff{border:1px solid #d0d7de;border-radius:6px;overflow:auto;max-height:720px}
.diff span{display:block;padding:0 6px} .add{background:#dafbe1} .del{background:#ffebe9}
.hunk{background:#ddf4ff;color:#57606a} .file{background:#f6f8fa;font-weight:600}
.passed{color:#1a7f37} .failed,.error,.missing{color:#cf222e} .skipped{color:#8c959f}
details.step{border:1px solid #d0d7de;border-radius:6px;margin:6px 0;padding:4px 10px;max-width:1200px}
details.step summary{cursor:pointer;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
details.step .thought{white-space:pre-wrap;margin:6px 0} details.step pre.out{background:#f6f8fa;padding:6px}
#flags li{color:#9a6700} #flags li.none{color:#656d76}
"""


def _diff_html(patch: str) -> str:
    rows = []
    # at LF only, as git splits a diff: str.splitlines also breaks at CR, FF, NEL, U+2028..., which showed the
    # rest of an added line as an unchanged one (red team 15b, R15b-6)
    for line in patch.removesuffix("\n").split("\n") if patch else []:
        kind = ("file" if line.startswith(("diff --git", "+++", "---", "index ")) else "hunk" if line.startswith("@@")
                else "add" if line.startswith("+") else "del" if line.startswith("-") else "")
        # bidi controls and invisible characters spelled: the reviewer reads the code that runs (R15b-2)
        rows.append(f'<span class="{kind}">{html.escape(visible_controls(line.removesuffix(chr(13)))) or " "}</span>')
    return "<pre>" + "".join(rows) + "</pre>" if rows else "<pre>(no changes)</pre>"


def _markdown_html(text: str) -> str:
    """The instruction rendered (CommonMark, raw HTML in it escaped: the statement is data), as the candidate read
    it: only sweserve's own interface markers go, any other comment is shown, and invisible characters and bidi
    controls are spelled as everywhere else on the page (red team 23h, R23h-1, R23h-2)."""
    from markdown_it import MarkdownIt

    text = text.replace(OPEN_MARK, "").replace(CLOSE_MARK, "")
    return MarkdownIt("commonmark", {"html": False}).render(visible_controls(text))


def read_steps(result: RunResult) -> list[TrajectoryStep]:
    """The agent's trajectory steps its trial folder holds (`steps.json`), or none."""
    if not result.trial_dir:
        return []
    path = Path(result.trial_dir) / TRAJECTORY_STEPS_FILE
    try:
        return [TrajectoryStep.model_validate(s) for s in json.loads(read_found_text(path, 256 << 20))]
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        return []


def _shown(text: str) -> str:
    """The agent's (or candidate's) words on a page: escaped, bidi controls and invisible characters spelled."""
    return html.escape(visible_controls(text))


def trajectory_html(steps: list[TrajectoryStep]) -> str:
    if not steps:
        return "<p>No trajectory was recorded for this run.</p>"
    out = []
    shown, more = steps[:MAX_STEPS_SHOWN], len(steps) - MAX_STEPS_SHOWN
    for n, step in enumerate(shown, 1):
        head = (step.command or step.thought).strip().splitlines()[0] if (step.command or step.thought).strip() else ""
        head = head if len(head) <= 140 else head[:139] + "…"
        body = ""
        if step.thought:
            body += f'<div class="thought">{_shown(step.thought)}</div>'
        if step.command:
            body += f"<pre class='cmd'>$ {_shown(step.command)}</pre>"
        if step.output:
            body += f"<pre class='out'>{_shown(step.output)}</pre>"
        out.append(f'<details class="step" id="step-{n}"><summary>step {n}: {_shown(head)}</summary>{body}'
                   "</details>")
    if more > 0:
        out.append(f"<p>… {more} more steps in the trial folder's steps.json</p>")
    return "".join(out)


def _folded(title: str, summary: str, text: str) -> str:
    return (f"<h2>{html.escape(title)}</h2><details><summary>{html.escape(summary)}</summary>"
            f"<pre>{html.escape(visible_controls(text))}</pre></details>")


# the page is data only: no script, no fetch from anywhere (a statement's markdown image from the PR text it was
# mined from, <img src="https://…">, told any host who reviewed which task and when: red team 23f, R23f-5)
REVIEW_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def review_html(bundle: TaskBundle, result: RunResult, board: str | None = None) -> str:
    """A reviewer page: the instruction rendered, candidate and oracle diffs side by side, the hidden tests'
    outcomes, the agent's trajectory step by step (folded), flags, and a link back to the board."""
    run = result.agent_run
    task = bundle.task
    who = run.candidate if run and run.candidate else result.agent
    e = html.escape
    nav = f'<nav><a id="back" href="{e(board, quote=True)}">← back to the board</a></nav>' if board else ""
    facts = [
        ("task", f"{task.task_id} ({task.family}), PR #{task.pr_number}"), ("candidate", who),
        ("status", result.status + (f" — {result.reason}" if result.reason else "")),
        ("attempt", str(result.attempt)), ("run", result.run_id),
        ("time used", f"{run.wall_s if run else result.duration_s:.0f} s ({run.exit_reason if run else 'n/a'})"),
        ("finished", f"{result.finished_at.astimezone(timezone.utc):%Y-%m-%d %H:%M UTC}"),
    ]
    if run and (run.steps or run.prompt_tokens or run.cost_usd is not None or run.metered is not None):
        cost = "—" if run.cost_usd is None else f"${run.cost_usd:.4f}"
        counted = USAGE_FROM.get(run.usage_from, "")
        if run.cost_usd is not None and run.usage_from != "host" and run.usage_from:
            cost += " (the agent's own record)"
        if run.metered is not None and not run.metered.complete:  # its counts are a floor (red team 17b, R17b-2)
            m = run.metered
            missed = m.requests - m.metered - m.refused  # unread, or never answered
            counted += (" (its egress proxy's meter could not be read: the agent's own record, unchecked)"
                        if m.unreadable else
                        f" (at least: its egress proxy could not read {max(missed, 0)} of its {m.requests} model calls"
                        + (f" and {m.tunnels} https tunnels" if m.tunnels else "") + ")")
        facts.append(("agent", f"{run.steps} steps, {run.prompt_tokens} prompt + {run.completion_tokens} "
                               f"completion tokens{counted}, cost {cost}"))
    table = "".join(f'<tr><th>{e(k)}</th><td id="fact-{e(k.replace(" ", "-"))}">{e(v)}</td></tr>'
                    for k, v in facts)
    outcomes = []
    for kind, tests in (("FAIL_TO_PASS", result.tests.fail_to_pass), ("PASS_TO_PASS", result.tests.pass_to_pass)):
        for test_id, outcome in tests.items():
            outcomes.append(f"<tr><td><code>{e(test_id)}</code></td><td>{kind}</td>"
                            f'<td class="{e(outcome)}">{e(outcome)}</td></tr>')
    # the flags and resets name the candidate's files as git wrote them (non-ASCII kept): spelled (R15g-3)
    # the agent's record disputed by its proxy's meter (red team 16e, R16e-5)
    flags = [f"<li>flagged: {_shown(f)}</li>" for f in result.flags] + [
        f"<li>flagged: {_shown(f)}</li>" for f in (run.flags if run else []) if f.startswith("usage_disagrees")] + [
        f"<li>reset to base: {_shown(r)}</li>" for r in result.resets]
    human = ""
    if run and run.keystrokes:
        human += _folded("Transcript", "what was typed, recorded on the host: the record", run.keystrokes)
    if run and run.screen:
        human += _folded("Terminal", "the end of what the terminal showed, recorded on the host", run.screen)
    flagged, history = _history(run) if run else ([], "")
    if flagged:
        human += _folded("Shell history", f"from inside the sandbox: ⚠ {', '.join(flagged)}. {HISTORY_NOTE}", history)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{REVIEW_CSP}">
<title>Review {e(task.task_id)} — {e(who)}</title>
<style>{REVIEW_CSS}</style></head><body>
{nav}
<h1>Review: {e(task.task_id)} — {e(who)}</h1>
<table id="facts">{table}</table>
<h2>Instruction</h2>
<div class="instruction" id="instruction">{_markdown_html(bundle.instruction)}</div>
<h2>Hidden tests</h2>
<table id="outcomes"><tr><th>test</th><th>kind</th><th>outcome</th></tr>{"".join(outcomes)}</table>
<h2>Flags</h2>
<section id="flags"><p>The tamper scan's flags say where to look; no grade depends on them.</p><ul>{"".join(flags) or '<li class="none">the tamper scan flagged nothing</li>'}</ul></section>
<h2>Diffs</h2>
<div class="diffs">
<div><h3>Candidate diff</h3><div class="diff" id="candidate-diff">{_diff_html(result.model_patch)}</div></div>
<div><h3>Oracle diff</h3><div class="diff" id="oracle-diff">{_diff_html(bundle.oracle_patch)}</div></div></div>
<h2>Trajectory</h2>
<section id="trajectory">{trajectory_html(read_steps(result))}</section>
{human}
</body></html>
"""
