"""The board: one HTML page for a set of results: leaderboard, per-family bars, task × agent matrix, config.

Charts are plotly figures; plotly.js is written once beside the page as `plotly.min.js` (the page needs no
network to view, and is not megabytes of inlined script). The matrix links each cell to a reviewer page,
written beside the board as reviews/<agent>/<task_id>.html (reporting/review.py), which links back.
Agents are ranked by pass@1 (then name), and the charts follow the table's order.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from sweserve.evaluation.results import latest
from sweserve.models import RunResult, TaskBundle
from sweserve.reporting.review import review_html, visible_controls
from sweserve.reporting.summary import MISSING, AgentReport

STATUS_COLOR = {"resolved": "#1a7f37", "failed": "#cf222e", "patch_failed": "#8250df", "error": "#bf8700",
                "skipped": "#8c959f", "tampered": "#a40e26", MISSING: "#cf222e"}
OTHER_COLOR = "#1f2328"  # a status this page does not know yet still renders
PLOT_CONFIG = {"displayModeBar": False, "responsive": False}
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px 32px;color:#1f2328}
h1{margin:0 0 4px} h2{margin-top:32px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.sub{color:#656d76;margin:0 0 16px}
table{border-collapse:collapse;font-size:14px} th,td{border:1px solid #d0d7de;padding:4px 10px;text-align:left}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
td.cell a{color:inherit;text-decoration:none} .se{color:#656d76;font-size:12px}
td.cell{font-weight:600;white-space:nowrap}
td.task{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;white-space:nowrap}
.charts{display:flex;flex-wrap:wrap;gap:16px}
"""


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "—" if x is None else f"±{100 * x:.1f}"


def _usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def _secs(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f} s"


def safe_name(name: str) -> str:
    """A file or folder name for an agent or task name (agents may be shell commands), one per name: a name that
    had to be changed or cut ends in '~' and a hash of the whole (no name kept as it is holds '~'). Cut to 120
    characters alone, two agents alike in their first 120 (two checkpoints of a run, by path) shared their
    reviewer pages, and one's cells opened the other's (red team 15b, R15b-8)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    # kept only in lower case: `Qwen3-Coder` and `qwen3-coder` are one folder on a case-insensitive disk (macOS,
    # Windows), where one agent's pages overwrote the other's (red team 15g, R15g-4)
    if cleaned == name == name.lower() and 0 < len(name) <= 120 and name not in (".", ".."):
        return name
    return f"{cleaned[:100]}~{hashlib.sha256(name.encode('utf-8', 'replace')).hexdigest()[:12]}"


def review_path(agent: str, task_id: str) -> str:
    return f"reviews/{safe_name(agent)}/{safe_name(task_id)}.html"


PLOTLY_FILE = "plotly.min.js"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def ranked(reports: list[AgentReport]) -> list[AgentReport]:
    """The leaderboard's order, which the charts follow: pass@1 high to low, then by name."""
    return sorted(reports, key=lambda r: (-(r.overall.pass_at_1 or 0), r.agent))


def write_plotly(folder: Path) -> Path:
    """plotly.js beside the page, written once (again only when plotly's version changed)."""
    from plotly.offline import get_plotlyjs

    path = folder / PLOTLY_FILE
    js = get_plotlyjs()
    if not path.is_file() or path.stat().st_size != len(js.encode("utf-8")):
        path.write_text(js, encoding="utf-8")
    return path


def _leaderboard_figure(reports: list[AgentReport]):
    import plotly.graph_objects as go

    reports = ranked(reports)
    names = [r.agent for r in reports]
    k = max((r.overall.k for r in reports), default=1)
    fig = go.Figure()
    errors = [100 * (r.overall.pass_at_1_stderr or 0) for r in reports]
    fig.add_bar(name="pass@1", x=names, y=[100 * (r.overall.pass_at_1 or 0) for r in reports],
                error_y={"type": "data", "array": errors, "visible": any(errors)})
    if k > 1:
        # an agent with fewer attempts has no pass@k: its own (a lower k) is not drawn as this one (R22b-4)
        fig.add_bar(name=f"pass@{k}", x=names,
                    y=[100 * (r.overall.pass_at_k or 0) if r.overall.k == k else None for r in reports])
    fig.update_layout(title="Leaderboard (error bars: standard error across attempts)", barmode="group",
                      yaxis={"title": "% of scored tasks", "range": [0, 100]}, height=380, width=560,
                      margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def _family_figure(reports: list[AgentReport]):
    import plotly.graph_objects as go

    families = sorted({f for r in reports for f in r.families})
    fig = go.Figure()
    for rep in ranked(reports):
        fig.add_bar(name=rep.agent, x=families,
                    y=[100 * (rep.families[f].pass_at_1 or 0) if f in rep.families else None for f in families])
    fig.update_layout(title="pass@1 per family", barmode="group", yaxis={"title": "%", "range": [0, 100]},
                      height=380, width=720, margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def _leaderboard_table(reports: list[AgentReport]) -> str:
    k = max((r.overall.k for r in reports), default=1)
    head = ["#", "agent", "model", "tasks", "scored", "pass@1 ± s.e."] + ([f"pass@{k}"] if k > 1 else []) + [
        "cost / task", "time / task"]
    rows = []
    for i, rep in enumerate(ranked(reports), start=1):
        a = html.escape(safe_name(rep.agent))
        o = rep.overall
        se = f' <span class="se" id="lb-{a}-pass_at_1_stderr">{_pp(o.pass_at_1_stderr)}</span>' \
            if o.pass_at_1_stderr is not None else ""
        cells = [
            ("num", "rank", str(i)), ("", "agent", html.escape(rep.agent)),
            ("", "model", html.escape(rep.model or "—")),
            ("num", "tasks", str(o.tasks)), ("num", "scored", str(o.scored)),
            ("num", "pass_at_1", f'<span id="lb-{a}-pass_at_1_value">{_pct(o.pass_at_1)}</span>{se}' + (
                f' <span class="se" id="lb-{a}-uneven_attempts" title="pass@1 weighs each task\'s own attempts; '
                'attempts added after seeing a task\'s first favour it">'
                f'{plural(len(rep.uneven_attempts), "task")} asked more attempts</span>' if rep.uneven_attempts else "")
                + (f' <span class="se" id="lb-{a}-runs_unselected" title="no manifest beside the results file: tasks '
                   'these runs were given and never finished are not counted">'
                   f'{plural(len(rep.runs_unselected), "run")} with no selection</span>' if rep.runs_unselected else "")
                + (f' <span class="se" id="lb-{a}-runs_file_gone" title="their manifests name a results file that is '
                   'gone, and they have no record here: their tasks are not counted">'
                   f'{plural(len(rep.runs_file_gone), "run")} of a file gone</span>' if rep.runs_file_gone else "")),
        ]
        if k > 1:
            # the column's k is the most attempts of any agent: an agent with another k has its own pass@k, said as
            # such, never a number under this one (red team 22b, R22b-4: a pass@1 read as a pass@3)
            cells.append(("num", "pass_at_k", _pct(o.pass_at_k) if o.k == k else
                          f'— <span class="se">pass@{o.k} {_pct(o.pass_at_k)}</span>'))
        cost = _usd(rep.cost_per_task_usd)
        if rep.cost_per_task_usd is not None and rep.cost_self_reported:
            cost += ' <span class="se" title="the agent\'s own record (written in its sandbox), not priced by ' \
                'sweserve">self-reported</span>'
        if rep.cost_per_task_usd is not None and rep.cost_attempts < rep.ran_attempts:
            cost += (f' <span class="se" id="lb-{a}-cost_attempts" title="the mean of the attempts with a cost: the '
                     'others left no record of one, or a record its proxy disputed">mean of '
                     f'{rep.cost_attempts} of {rep.ran_attempts}</span>')
        if rep.usage_disputed:  # their costs were dropped: the mean is of the other attempts' (red team 16e, R16e-5)
            cost += (f' <span class="se" id="lb-{a}-usage_disputed" title="attempts whose own record of tokens '
                     'disagreed with what their egress proxy metered: their costs are left out of this mean">'
                     f'{plural(rep.usage_disputed, "disputed attempt")}</span>')
        if rep.usage_unmetered:  # their records unchecked above what the proxy read (red team 17b, R17b-5)
            cost += (f' <span class="se" id="lb-{a}-usage_unmetered" title="attempts whose egress proxy could not '
                     'read every model call: their tokens and costs are the agent\'s own record, checked only '
                     f'against what it read">{rep.usage_unmetered} metered in part</span>')
        cells += [("num", "cost_per_task_usd", cost),
                  ("num", "time_per_task_s", _secs(rep.time_per_task_s))]
        rows.append(f'<tr id="lb-row-{i}">' + "".join(f'<td class="{c}" id="lb-{a}-{m}">{t}</td>' for c, m, t in cells)
                    + "</tr>")
    return ("<table id='leaderboard'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
            + "".join(rows) + "</table>")


def _family_table(reports: list[AgentReport]) -> str:
    families = sorted({f for r in reports for f in r.families})
    reports = ranked(reports)
    out = ["<table id='families'><tr><th>family</th>" + "".join(f"<th>{html.escape(r.agent)}</th>" for r in reports)
           + "</tr>"]
    for f in families:
        cells = []
        for rep in reports:
            rate = rep.families.get(f)
            text = "—" if rate is None else f"{_pct(rate.pass_at_1)} ({rate.scored})"
            cells.append(f'<td class="num" id="fam-{safe_name(rep.agent)}-{f}">{text}</td>')
        out.append(f"<tr><td>{f}</td>{''.join(cells)}</tr>")
    return "".join(out) + "</table>"


def _matrix(reports: list[AgentReport], linked: set[tuple[str, str]]) -> str:
    reports = ranked(reports)
    families = {row.task_id: row.family for rep in reports for row in rep.tasks}
    by = {(rep.agent, row.task_id): row for rep in reports for row in rep.tasks}
    out = ["<table id='matrix'><tr><th>task</th><th>family</th>"
           + "".join(f"<th>{html.escape(r.agent)}</th>" for r in reports) + "</tr>"]
    for task_id in sorted(families):
        cells = []
        for rep in reports:
            row = by.get((rep.agent, task_id))
            if row is None:
                cells.append("<td></td>")
                continue
            text = row.status
            if row.attempts > 1 and row.status != "skipped":
                text = f"{row.status} {row.resolved_attempts}/{row.attempts}"
            title = row.reason or row.status
            if row.flags:  # the tamper scan's: a reviewer's aid, never part of the grade
                title += f" [flags: {', '.join(row.flags)}]"
            title = html.escape(visible_controls(title), quote=True)  # flags name the candidate's files (R15g-3)
            body = html.escape(text)
            if (rep.agent, task_id) in linked:
                body = f'<a href="{html.escape(review_path(rep.agent, task_id))}">{body}</a>'
            cells.append(f'<td class="cell" id="cell-{safe_name(rep.agent)}-{html.escape(task_id)}" '
                         f'style="color:{STATUS_COLOR.get(row.status, OTHER_COLOR)}" title="{title}">{body}</td>')
        out.append(f"<tr><td class='task'>{html.escape(task_id)}</td><td>{families[task_id]}</td>{''.join(cells)}</tr>")
    return "".join(out) + "</table>"


def _config(reports: list[AgentReport], config: dict) -> str:
    rows = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in config.items()]
    for rep in ranked(reports):
        rows.append((f"agent {rep.agent}", f"model {rep.model or '—'}, version {rep.version or '—'}, "
                     f"k = {rep.overall.k}, {plural(rep.attempts, 'attempt')}, runs {', '.join(rep.run_ids)}"))
    return ("<table id='config'>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                                            for k, v in rows) + "</table>")


def _review_choice(results: list[RunResult]) -> dict[tuple[str, str], RunResult]:
    """For each (agent, task): the latest record of its first attempt, the one the matrix's status shows."""
    chosen: dict[tuple[str, str], RunResult] = {}
    for r in latest(results).values():
        key = (r.agent, r.task_id)
        if key not in chosen or r.attempt < chosen[key].attempt:
            chosen[key] = r
    return chosen


def write_html_report(reports: list[AgentReport], results: list[RunResult], bundles: dict[str, TaskBundle],
                      out: Path, config: dict | None = None) -> Path:
    """Write the page to `out` and one reviewer page per (agent, task) whose task bundle is known."""
    out.parent.mkdir(parents=True, exist_ok=True)
    linked = set()
    for (agent, task_id), result in _review_choice(results).items():
        bundle = bundles.get(task_id)
        if bundle is None:
            continue
        review = out.parent / review_path(agent, task_id)
        review.parent.mkdir(parents=True, exist_ok=True)
        review.write_text(review_html(bundle, result, board=f"../../{out.name}"), encoding="utf-8")
        linked.add((agent, task_id))
    charts = script = ""
    if reports:
        write_plotly(out.parent)
        script = f'<script src="{PLOTLY_FILE}"></script>'
        charts = (_leaderboard_figure(reports).to_html(full_html=False, include_plotlyjs=False,
                                                       div_id="chart-leaderboard", config=PLOT_CONFIG)
                  + _family_figure(reports).to_html(full_html=False, include_plotlyjs=False, div_id="chart-families",
                                                   config=PLOT_CONFIG))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    tasks = len({row.task_id for rep in reports for row in rep.tasks})
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sweserve report</title><style>{CSS}</style>{script}</head>
<body>
<h1>sweserve report</h1>
<p class="sub" id="summary">{plural(len(reports), "agent")} on {plural(tasks, "task")} · generated {generated}</p>
<h2>Leaderboard</h2>
<p class="sub">Ranked by pass@1: the mean over scored tasks of each task's share of resolved attempts; ± its standard
error across attempts.</p>
{_leaderboard_table(reports)}
<div class="charts">{charts}</div>
<h2>Per family (pass@1, scored tasks)</h2>
{_family_table(reports)}
<h2>Tasks × agents</h2>
<p class="sub">Each cell links to the reviewer page of that agent's first attempt (instruction, diffs, hidden tests,
trajectory, flags).</p>
{_matrix(reports, linked)}
<h2>Configuration</h2>
{_config(reports, config or {})}
</body></html>
"""
    out.write_text(page, encoding="utf-8")
    return out
