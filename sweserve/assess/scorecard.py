"""Scorecards of a pack: one HTML page per candidate, a replay page per task they worked, and a CSV of all.

A scorecard shows, per task, whether it was resolved, the time used, the hidden tests passed, and the task's
calibrated difficulty; then the candidate's ability (with its standard error) beside the agents' and the other
candidates' (one Rasch fit over the pack's results and any agents' results given), and a reviewer-notes field.
A replay page plays the host-recorded cast with asciinema-player (its files copied from node_modules into the
report's folder, so the pages open from disk) beside the diff, the hidden-test outcomes and the commands typed.
Everything a candidate produced is escaped: a submission or a terminal cannot script a reviewer's page.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import cast

from sweserve.agents.terminal import TOKEN, TypedLines
from sweserve.assess.agent import CAST_FILE
from sweserve.assess.difficulty import Calibration, calibrate, is_human
from sweserve.assess.packs import Pack
from sweserve.assess.recorder import commands_from_cast, output_unkept, read_cast
from sweserve.errors import SweserveError
from sweserve.evaluation.results import manifest_or_none, manifest_paths, read_results
from sweserve.models import FAMILIES, Family, RunResult
from sweserve.reporting.review import visible_controls

PLAYER = {"asciinema-player.min.js": "asciinema-player/dist/bundle/asciinema-player.min.js",
          "asciinema-player.css": "asciinema-player/dist/bundle/asciinema-player.css"}
CSV_COLUMNS = ["candidate", "pack", "pack_version", "task_id", "same_task", "status", "time_used_s", "time_budget_s",
               "tests_passed", "tests_total", "task_difficulty", "task_difficulty_se", "ability", "ability_se",
               "earlier_attempts", "commands_unlisted", "output_unrecorded_bytes"]


def replay_name(candidate: str, task_id: str) -> str:
    """A replay page's file name, one (candidate, task)'s only: joined by `.`, which a candidate's name cannot hold
    (`Invite.candidate`'s pattern). Joined by `-`, which both may hold, candidate `bob` on task `x-o__r-1` and
    `bob-x` on `o__r-1` wrote one file, the second replacing the first (red team 20b, R20b-2)."""
    if "." in candidate:
        raise ValueError(f"{candidate!r}: a candidate's name holds no dot")
    return f"replay-{candidate}.{task_id}.html"


def same_task(pack: Pack, r: RunResult) -> bool:
    """Whether r was graded against the task content the pack names (a result of another version is shown, marked)."""
    return any(t.task_id == r.task_id and t.content_hash == r.task_hash for t in pack.tasks)


NO_RESULT = "the session ended with no result (the server stopped)"


def pack_attempts(results_dir: Path, cut_alone: bool = False) -> dict[tuple[str, str], list[RunResult]]:
    """Every attempt of each (candidate, task), oldest first, the graded one last: a second link for the same
    pack is a retake, and the scorecard says so (red team 12a, R12a-3: the first session, where the task was
    read and worked out, was on no page). A task a run's manifest selected and that run never gave a result
    for (`assess serve` stopped mid-session) is an attempt too, listed before a later graded one: the retake
    after a restart was numbered 1 again and read as a first try (red team 16c, R16c-2). With `cut_alone` (another
    pack's folder, `other_packs`), a task whose only attempt there was cut is listed too (red team 16f, R16f-4)."""
    every: dict[tuple[str, str], dict[tuple[str, int], RunResult]] = {}
    for path in sorted(results_dir.glob("*.jsonl")):
        for r in read_results(path):
            every.setdefault((r.agent, r.task_id), {})[(r.run_id, r.attempt)] = r
    started: dict[str, datetime] = {}  # each run's start, from its manifest
    for manifest in manifest_paths(results_dir / "runs"):
        m = manifest_or_none(manifest)
        if m is None or m.started_at is None or m.started_at.tzinfo is None:  # not a manifest this version wrote
            continue
        run_id, agent, begun = m.run_id, m.agent, m.started_at
        tasks = {t: m.attempts_for(t) for t in m.tasks}
        started[run_id] = begun
        for task_id, attempt in tasks.items():
            key = (agent, task_id)
            # its terminal started (the statement is shown only then): a session cut while the image built is none
            shown = (manifest.parent / agent / task_id / str(attempt) / CAST_FILE).is_file()
            if shown and (key in every or cut_alone) and not any(rid == run_id for rid, _ in every.get(key, {})):
                family = next(iter(every[key].values())).family if every.get(key) else m.families.get(task_id)
                if family not in FAMILIES:  # a manifest that names no family for it (older): no record to make
                    continue
                every.setdefault(key, {})[(run_id, 0)] = RunResult(
                    run_id=run_id, task_id=task_id, family=cast(Family, family), agent=agent,
                    attempt=attempt, status="error", error_kind="internal", reason=NO_RESULT, started_at=begun,
                    finished_at=begun, duration_s=0.0)

    def when(r: RunResult) -> datetime:
        return started.get(r.run_id, r.started_at)

    def cut(r: RunResult) -> bool:
        return r.status == "error" and r.reason == NO_RESULT

    out = {}
    for key, by in every.items():
        if all(cut(r) for r in by.values()):  # `cut_alone`: no graded attempt in this folder
            out[key] = sorted(by.values(), key=lambda r: (when(r), r.attempt))
            continue
        last = max((r for r in by.values() if not cut(r)), key=lambda r: (r.attempt, when(r)))
        # a session cut after the graded one is not before it (or is still running as the report is made)
        before = sorted((r for r in by.values() if r is not last and not (cut(r) and when(r) > when(last))),
                        key=lambda r: (when(r), r.attempt))
        out[key] = [*before, last]
    return out


def earlier(attempts: list[RunResult], elsewhere: list[tuple[str, RunResult]] | None = None) -> str:
    """The attempts before the graded one, as the scorecard and the CSV show them ("" for none): the same task's
    attempts in other packs first, each named with its pack."""
    def one(r: RunResult, pack: str | None = None) -> str:
        return (f"attempt {r.attempt}" + (f" in pack {pack}" if pack else "") + ": "
                + (NO_RESULT if r.status == "error" and r.reason == NO_RESULT else r.status)
                + (f", {r.agent_run.wall_s / 60:.1f} min" if r.agent_run else ""))
    return "; ".join([one(r, pack) for pack, r in elsewhere or []] + [one(r) for r in attempts[:-1]])


def other_packs(results_dir: Path) -> dict[tuple[str, str], list[tuple[str, RunResult]]]:
    """Every attempt in the other packs' folders beside results_dir (`<output>/<pack>/`), by (candidate, task):
    attempts are numbered per pack, and a task that is in two packs (a second round, a pack rebuilt under a new
    name) was a first try in each (red team 16c, R16c-5)."""
    out: dict[tuple[str, str], list[tuple[str, RunResult]]] = {}
    # a folder once, by what it is: a link to this pack's folder (`<output>/current`) is no other pack, and two
    # names of one other pack list its attempts once (red team 16f, R16f-5)
    seen = {results_dir.resolve()}
    folders = sorted(results_dir.parent.iterdir(), key=lambda f: (f.is_symlink(), f.name)) \
        if results_dir.parent.is_dir() else []  # a pack by its own name before a link's
    for folder in folders:
        if folder.resolve() in seen or not folder.is_dir() or not any(folder.glob("*.jsonl")):
            continue
        seen.add(folder.resolve())
        try:
            attempts_there = pack_attempts(folder, cut_alone=True)
        except SweserveError:  # no pack's results (an export, a dataset): not this pack's to refuse (R16f-7)
            continue
        for key, attempts in attempts_there.items():
            out.setdefault(key, []).extend((folder.name, r) for r in attempts)
    return out


def tests_passed(r: RunResult) -> tuple[int, int]:
    outcomes = list(r.tests.fail_to_pass.values()) + list(r.tests.pass_to_pass.values())
    return sum(o == "passed" for o in outcomes), len(outcomes)


@dataclass
class Scorecards:
    pages: dict[str, Path]
    csv: Path


def write_scorecards(pack: Pack, results_dir: Path, out: Path, node_modules: Path | None,
                     others: list[RunResult], missing: Sequence[tuple[str, str, str]] = ()) -> Scorecards:
    """Pages for every candidate with results in results_dir; `others` (agents' results) join the fit, and
    `missing` (agent, task, family), their selected attempts with no result, as unsolved ones (R22f-4)."""
    history = pack_attempts(results_dir)
    elsewhere = other_packs(results_dir)
    mine = [attempts[-1] for attempts in history.values()]
    # the fit takes every graded attempt, as `report --difficulty` does: on the last alone, a retake's failed first
    # attempt left the ability shown beside it (red team 16c, R16c-3)
    # an attempt of the pack's own in `others` (its results file named among the agents') is the same attempt, once:
    # twice, the candidate's standard error shrank beside another's on the same record (red team 22f, R22f-2)
    own = {(r.run_id, *r.key) for attempts in history.values() for r in attempts}
    others = [r for r in others if (r.run_id, *r.key) not in own]
    missing = [m for m in missing if (m[0], m[1]) not in history]  # the pack's own: its attempts are listed above
    cal = calibrate([r for attempts in history.values() for r in attempts] + others
                    # and this pack's candidates' attempts of its tasks in other packs (R16c-5's): a retake there
                    # is a retake too (red team 16f, R16f-3)
                    + [r for key, rs in elsewhere.items() if key in history for _, r in rs], missing)
    out.mkdir(parents=True, exist_ok=True)
    if node_modules is not None:
        (out / "vendor").mkdir(exist_ok=True)
        for name, rel in PLAYER.items():
            shutil.copyfile(node_modules / rel, out / "vendor" / name)
    budgets = {t.task_id: t.time_budget_s for t in pack.tasks}
    candidates = sorted({r.agent for r in mine if is_human(r.agent)})
    rows, pages = [], {}
    for agent in candidates:
        name = agent.removeprefix("human-")
        results = {r.task_id: r for r in mine if r.agent == agent}
        unlisted: dict[str, int] = {}
        unrecorded: dict[str, int] = {}
        for t in pack.tasks:
            r = results.get(t.task_id)
            if r is None:
                continue
            commands = typed_in(r)
            unlisted[t.task_id] = commands.unlisted
            recording = Path(r.trial_dir or "") / CAST_FILE
            unrecorded[t.task_id] = output_unkept(recording) if recording.is_file() else 0
            passed, total = tests_passed(r)
            rows.append({"candidate": name, "pack": pack.name, "pack_version": pack.version, "task_id": t.task_id,
                         "same_task": "yes" if same_task(pack, r) else "no", "status": r.status, "time_used_s": r.agent_run.wall_s if r.agent_run else "",
                         "time_budget_s": budgets[t.task_id], "tests_passed": passed, "tests_total": total,
                         "task_difficulty": _num(cal.fit.difficulty.get(t.task_id)),
                         "task_difficulty_se": _num(cal.fit.difficulty_se.get(t.task_id)),
                         "ability": _num(cal.fit.ability.get(agent)), "ability_se": _num(cal.fit.ability_se.get(agent)),
                         "earlier_attempts": earlier(history[(agent, t.task_id)],
                                                     elsewhere.get((agent, t.task_id), [])),
                         "commands_unlisted": commands.unlisted,
                         "output_unrecorded_bytes": unrecorded[t.task_id]})
            (out / replay_name(name, t.task_id)).write_text(replay_page(name, r, commands))
        pages[name] = out / f"scorecard-{name}.html"
        before = {t: earlier(history[(agent, t)], elsewhere.get((agent, t), [])) for t in results}
        pages[name].write_text(scorecard_page(pack, name, agent, results, cal, budgets, before, unlisted, unrecorded))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    csv_path = out / f"{pack.name}.csv"
    csv_path.write_text(buf.getvalue())
    return Scorecards(pages, csv_path)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


STYLE = """<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
.resolved{color:#070;font-weight:bold}.failed,.patch_failed,.tampered,.error{color:#a00;font-weight:bold}
pre{background:#f6f6f6;padding:.6em;overflow:auto;max-height:30em}
.me{background:#ffd}.grid{display:grid;grid-template-columns:2fr 3fr;gap:1.5em}.grid>div{min-width:0}
textarea{width:100%;min-height:8em}#commands code{word-break:break-all;white-space:pre-wrap}
kbd{background:#eef;border:1px solid #99c;border-radius:3px;padding:0 .2em;font-size:.85em;color:#336}</style>"""


def scorecard_page(pack: Pack, name: str, agent: str, results: dict[str, RunResult], cal: Calibration,
                   budgets: dict[str, int], before: dict[str, str] | None = None,
                   unlisted: dict[str, int] | None = None, unrecorded: dict[str, int] | None = None) -> str:
    e = html.escape
    fit = cal.fit
    rows = []
    for t in pack.tasks:
        r = results.get(t.task_id)
        if r is None:
            rows.append(f"<tr><td>{e(t.task_id)}</td><td colspan=5>not attempted</td></tr>")
            continue
        passed, total = tests_passed(r)
        used = f"{r.agent_run.wall_s / 60:.1f} of {budgets[t.task_id] / 60:.0f} min" if r.agent_run else "—"
        diff = (f"{fit.difficulty[t.task_id]:+.2f} ± {fit.difficulty_se[t.task_id]:.2f}"
                if t.task_id in fit.difficulty else "—")
        other = "" if same_task(pack, r) else " <b>(graded against another version of the task)</b>"
        if retake := (before or {}).get(t.task_id):
            other += f" <b>(a retake: {e(retake)})</b>"
        if n := (unlisted or {}).get(t.task_id):
            # a flood typed before and after a command hides it from the list's kept head and tail (red team 17d,
            # R17d-6): no honest session types tens of thousands of lines, and the reviewer is told to read the replay
            other += (f" <b class=flood>({n} commands typed are not on the commands list: a flood of lines; "
                      "read the replay)</b>")
        if n := (unrecorded or {}).get(t.task_id):
            # past the cast's output budget the candidate still sees the terminal's output, which the replay does not
            # hold: a flood of output first hides the rest of the session's (red team 18d, R18d-3)
            other += (f" <b class=flood>({n} bytes of output shown to the candidate is not in the replay: past the "
                      "recording limit)</b>")
        rows.append(f"<tr><td>{e(t.task_id)}{other}</td><td class={e(r.status)}>{e(r.status)}</td><td>{used}</td>"
                    f"<td>{passed} / {total}</td><td>{diff}</td>"
                    f"<td><a href='{e(replay_name(name, t.task_id))}'>replay</a></td></tr>")
    standing = []
    for who, theta in sorted(fit.ability.items(), key=lambda kv: -kv[1]):
        kind = "candidate" if is_human(who) else "agent"
        label = who.removeprefix("human-") if is_human(who) else who
        standing.append(f"<tr class={'me' if who == agent else 'x'}><td>{e(label)}</td><td>{kind}</td>"
                        f"<td>{theta:+.2f} ± {fit.ability_se[who]:.2f}</td></tr>")
    me = fit.ability.get(agent)
    summary = (f"ability {me:+.2f} ± {fit.ability_se[agent]:.2f} logits (95% interval "
               f"{me - 1.96 * fit.ability_se[agent]:+.2f} to {me + 1.96 * fit.ability_se[agent]:+.2f})"
               if me is not None else "no graded attempt")
    # the notes' key joins pack and candidate with '/', which neither name holds: with '-' (which both may hold),
    # candidate senior-jane of pack backend and jane of backend-senior shared one key (red team 15b, R15b-5)
    return f"""<!doctype html><html><head><meta charset=utf-8><title>Scorecard: {e(name)}</title>{STYLE}</head><body>
<h1>Scorecard: <span id=candidate>{e(name)}</span></h1>
<p>Pack <b>{e(pack.name)}</b> (version {e(pack.version)}), {len(pack.tasks)} tasks, {pack.time_budget_s // 60} minutes.
Resolved {sum(r.status == 'resolved' for r in results.values())} of {len(pack.tasks)}; <span id=ability>{summary}</span>.</p>
<table id=tasks><tr><th>task</th><th>result</th><th>time used</th><th>hidden tests passed</th>
<th>difficulty (logits)</th><th>replay</th></tr>{''.join(rows)}</table>
<h2>Against agents and other candidates</h2>
<p>Rasch fit over every graded attempt on these tasks; higher is stronger; ± one standard error.</p>
<table id=standing><tr><th>who</th><th>kind</th><th>ability</th></tr>{''.join(standing)}</table>
<h2>Reviewer notes</h2>
<textarea id=notes placeholder="notes for the hiring panel (kept in this browser)"></textarea>
<script>const k='sweserve-notes/{e(pack.name)}/{e(name)}', n=document.getElementById('notes');
n.value=localStorage.getItem(k)||''; n.oninput=()=>localStorage.setItem(k,n.value);</script>
</body></html>"""


def _typed_html(command: str) -> str:
    """A commands-typed entry with the record's own tokens (keys, markers: ⟨…⟩, ↵, ⇥) set apart as <kbd>: nothing
    typed can look like one, since the record shows every typed character outside printable ASCII by its code
    point (`agents.terminal.typed_lines`), so a typed `⟨^C⟩` is never a key in the page (red team 14d, R14d-3)."""
    out, keys = [], []  # consecutive tokens share one <kbd>: one each made a Tab 14 bytes of page (R17d-5)
    for i, p in enumerate(TOKEN.split(command)):
        if i % 2:
            keys.append(p)
        elif p:
            if keys:
                out.append(f"<kbd>{html.escape(''.join(keys))}</kbd>")
                keys = []
            out.append(html.escape(p))
    if keys:
        out.append(f"<kbd>{html.escape(''.join(keys))}</kbd>")
    return "".join(out)


COMMANDS_PAGE_MIN = 2**20  # bytes the commands table may always take


def _command_rows(commands: list[tuple[float, str]], budget: int) -> str:
    """The commands-typed table's rows, at most `budget` bytes of them: past it, the first nine tenths and the last
    tenth are kept, and a row between says how many are not shown. A key's row is many times its bytes in the cast
    for some keys (a Tab 2 bytes of cast, `&` 1, each several of page): lines of them within the cast's input
    budget made a page of ~600 MB, which no browser opens (red team 17d, R17d-5)."""
    rows = [f"<tr><td>{t:.1f}s</td><td><code>{_typed_html(c)}</code></td></tr>" for t, c in commands]
    sizes = [len(r.encode("utf-8")) for r in rows]
    if sum(sizes) <= budget:
        return "".join(rows)
    head, size = [], 0
    for r, n in zip(rows, sizes, strict=True):
        if size + n > budget * 9 // 10:
            break
        head.append(r)
        size += n
    tail: list[str] = []
    size = 0
    for r, n in zip(reversed(rows[len(head):]), reversed(sizes[len(head):]), strict=True):
        if size + n > budget // 10:
            break
        tail.append(r)
        size += n
    left = len(rows) - len(head) - len(tail)
    text = f"⟨{left} more commands typed, not shown here (too large a page); the cast has them⟩"
    note = f"<tr><td></td><td><code><kbd>{html.escape(text)}</kbd></code></td></tr>"
    return "".join(head) + note + "".join(reversed(tail))


def typed_in(r: RunResult) -> TypedLines:
    """The commands typed in r's session, from its host-recorded cast (none without one)."""
    cast = Path(r.trial_dir or "") / CAST_FILE
    return commands_from_cast(cast) if cast.is_file() else TypedLines()


def replay_page(name: str, r: RunResult, commands: TypedLines | None = None) -> str:
    e = html.escape
    cast = Path(r.trial_dir or "") / CAST_FILE
    cast_text = cast.read_text(encoding="utf-8", errors="replace") if cast.is_file() else ""
    commands = typed_in(r) if commands is None else commands
    # the table is two thirds of the cast at most (the player's data is 4/3 of it): the page stays twice the cast
    cmd_rows = _command_rows(commands, COMMANDS_PAGE_MIN + 2 * len(cast_text.encode("utf-8")) // 3)
    tests = "".join(f"<tr><td>{e(kind)}</td><td>{e(tid)}</td><td class={'resolved' if o == 'passed' else 'failed'}>"
                    f"{e(o)}</td></tr>"
                    for kind, outcomes in (("fail→pass", r.tests.fail_to_pass), ("pass→pass", r.tests.pass_to_pass))
                    for tid, o in outcomes.items())
    # the cast goes into a script as base64 of its UTF-8: no recorded text can end the script element, and the page
    # is 4/3 of the recording whatever it holds (a JSON string with '<' spelled \u003c made a cast of '<' six times
    # its size: 64 MiB of output, a 380 MiB page; red team 15b, R15b-4)
    data = ("new TextDecoder().decode(Uint8Array.from(atob('" + base64.b64encode(cast_text.encode("utf-8")).decode()
            + "'), c => c.charCodeAt(0)))")
    end = max((t for t, _, _ in read_cast(cast)[1]), default=0.0) if cast_text else 0.0
    # the poster is the last frame: the page opens on the terminal as the candidate left it
    player = ("<div id=player></div><script>AsciinemaPlayer.create({data: " + data + "}, "
              "document.getElementById('player'), {fit: 'width', idleTimeLimit: 2, terminalFontSize: '13px', "
              f"poster: 'npt:{max(0.0, end - 0.01):.2f}'}});</script>"
              if cast_text else "<p>No recording.</p>")
    return f"""<!doctype html><html><head><meta charset=utf-8><title>Replay: {e(name)} / {e(r.task_id)}</title>
<link rel=stylesheet href=vendor/asciinema-player.css><script src=vendor/asciinema-player.min.js></script>{STYLE}</head>
<body><h1>{e(name)} — {e(r.task_id)}: <span class={e(r.status)}>{e(r.status)}</span></h1>
<h2>Terminal (recorded on the server)</h2><div style="max-width:56em">{player}</div>
<div class=grid><div><h2>Commands typed</h2>
<table id=commands><tr><th>at</th><th>command</th></tr>{cmd_rows}</table></div>
<div><h2>Hidden tests</h2><table id=outcomes><tr><th>kind</th><th>test</th><th>outcome</th></tr>{tests}</table>
<h2>Diff</h2><pre id=diff>{e(visible_controls(r.model_patch.replace(chr(13) + chr(10), chr(10)))) or '(no change)'}</pre></div></div></body></html>"""
