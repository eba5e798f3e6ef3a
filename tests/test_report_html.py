"""`sweserve report A.jsonl B.jsonl --html`: one self-contained page, checked in headless Chromium against --json."""

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sweserve.dataset.taskstore import load_all
from sweserve.models import AgentRun, RunResult, TestResults
from sweserve.reporting.summary import build_reports, pass_at_k, stderr_across_attempts

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _result(bundle, agent, attempt, status, model, cost, wall):
    t = bundle.task
    outcome = "passed" if status == "resolved" else "failed"
    return RunResult(
        run_id=f"{agent}-run", task_id=t.task_id, family=t.family, agent=agent, attempt=attempt, status=status,
        reason=None if status in ("resolved", "failed") else "needs 2 GPUs (host has 0)",
        model_patch=bundle.oracle_patch if status == "resolved" else "",
        tests=TestResults(fail_to_pass={x: outcome for x in t.FAIL_TO_PASS}),
        agent_run=AgentRun(agent=agent, model=model, version="1.0", cost_usd=cost, wall_s=wall, steps=3),
        started_at=T0, finished_at=T0 + timedelta(seconds=wall), duration_s=wall + 5)


@pytest.fixture(scope="module")
def results_files(tmp_path_factory):
    """Two agents, three attempts each, on the six demo tasks; one task skipped for one agent."""
    tmp = tmp_path_factory.mktemp("results")
    bundles = load_all(TASKS)
    solved = {"alpha": [{0, 1, 2, 3}, {0, 1, 2}, {0, 1, 2, 3, 4}], "beta": [{0}, {0, 5}, set()]}
    paths = []
    for agent, per_attempt in solved.items():
        lines = []
        for attempt, ok in enumerate(per_attempt, start=1):
            for i, b in enumerate(bundles):
                status = "resolved" if i in ok else "failed"
                if agent == "beta" and i == 4:
                    status = "skipped"
                cost = None if agent == "beta" else 0.01 * (i + 1)
                lines.append(_result(b, agent, attempt, status, f"model-{agent}", cost, 10.0 * attempt + i))
        path = tmp / f"{agent}.jsonl"
        path.write_text("".join(r.model_dump_json() + "\n" for r in lines))
        paths.append(path)
    return paths


def test_pass_at_k_estimator_and_stderr():
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)  # 1 - C(2,2)/C(3,2)
    assert pass_at_k(3, 0, 3) == 0 and pass_at_k(3, 2, 2) == 1
    assert stderr_across_attempts([0.5]) is None
    assert stderr_across_attempts([0.4, 0.6]) == pytest.approx(0.1)


def test_report_rates_with_attempts_costs_and_times(results_files):
    from sweserve.evaluation.results import read_results

    alpha, beta = build_reports([r for p in results_files for r in read_results(p)])
    assert alpha.model == "model-alpha" and alpha.overall.k == 3 and alpha.attempts == 18
    assert alpha.overall.pass_at_1 == pytest.approx(12 / 18)
    # per-attempt rates 4/6, 3/6, 5/6 → their standard error
    assert alpha.overall.pass_at_1_stderr == pytest.approx(stderr_across_attempts([4 / 6, 3 / 6, 5 / 6]))
    assert alpha.overall.pass_at_k == pytest.approx(5 / 6)  # task 5 never solved
    assert alpha.cost_per_task_usd == pytest.approx(0.035)
    assert alpha.time_per_task_s == pytest.approx(22.5)
    assert beta.cost_per_task_usd is None and beta.overall.scored == 5
    assert beta.overall.pass_at_1_stderr == pytest.approx(stderr_across_attempts([1 / 5, 2 / 5, 0]))


class _Cells(HTMLParser):
    """Text of every element with an id, from the DOM Chromium dumps."""

    def __init__(self):
        super().__init__()
        self.stack, self.text, self.links, self.svgs = [], {}, {}, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "main-svg" in (a.get("class") or ""):
            self.svgs += 1
        if tag == "a" and self.stack and self.stack[-1]:
            self.links[self.stack[-1]] = a.get("href")
        if tag not in ("br", "meta", "img", "input", "link", "path", "rect", "line", "circle"):
            self.stack.append(a.get("id") or (self.stack[-1] if self.stack else None))
            if a.get("id"):
                self.text[a["id"]] = ""

    def handle_endtag(self, tag):
        if tag not in ("br", "meta", "img", "input", "link", "path", "rect", "line", "circle") and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] in self.text:
            self.text[self.stack[-1]] += data


def _chromium():
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1":
            pytest.fail("SWESERVE_REQUIRE_DOCKER=1 but chromium is not installed (scripts/setup.sh installs it)")
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    return exe


def test_html_report_in_headless_chromium_matches_json(results_files, tmp_path):
    out = tmp_path / "site" / "report.html"
    cli = [sys.executable, "-m", "sweserve.cli", "report", *map(str, results_files), "--tasks", str(TASKS)]
    proc = subprocess.run([*cli, "--html", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(subprocess.run([*cli, "--json"], capture_output=True, text=True, check=True).stdout)

    page = out.read_text()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"?https?:", page)  # nothing fetched to view it
    chromium = _chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"]
    shot = tmp_path / "report.png"
    subprocess.run([chromium, *flags, f"--screenshot={shot}", out.as_uri()], capture_output=True, timeout=120,
                   check=True)
    assert shot.stat().st_size > 20_000
    dom = subprocess.run([chromium, *flags, "--virtual-time-budget=5000", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    cells = _Cells()
    cells.feed(dom)
    assert cells.svgs >= 2  # plotly drew both charts offline

    def pct(x):
        return "—" if x is None else f"{100 * x:.1f}%"

    for rep in reports:
        a, o = rep["agent"], rep["overall"]
        assert cells.text[f"lb-{a}-model"] == rep["model"]
        assert cells.text[f"lb-{a}-pass_at_1"] == pct(o["pass_at_1"])
        assert cells.text[f"lb-{a}-pass_at_1_stderr"] == f"±{100 * o['pass_at_1_stderr']:.1f}"
        assert cells.text[f"lb-{a}-pass_at_k"] == pct(o["pass_at_k"])
        cost = rep["cost_per_task_usd"]
        assert cells.text[f"lb-{a}-cost_per_task_usd"] == ("—" if cost is None else f"${cost:.4f}")
        assert cells.text[f"lb-{a}-time_per_task_s"] == f"{rep['time_per_task_s']:.1f} s"
        for fam, rate in rep["families"].items():
            assert cells.text[f"fam-{a}-{fam}"] == f"{pct(rate['pass_at_1'])} ({rate['scored']})"
        for row in rep["tasks"]:
            cell = f"cell-{a}-{row['task_id']}"
            want = "skipped" if row["status"] == "skipped" else \
                f"{row['status']} {row['resolved_attempts']}/{row['attempts']}"
            assert cells.text[cell] == want
            href = cells.links[cell]
            assert href == f"reviews/{a}/{row['task_id']}.html"
            review = (out.parent / href).read_text()
            assert row["task_id"] in review and "Hidden tests" in review
    assert "alpha-run" in cells.text["config"] and "beta.jsonl" in cells.text["config"]
