"""`sweserve report A.jsonl B.jsonl --html`: one self-contained page, checked in headless Chromium against --json."""

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
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
        if agent == "alpha":  # its first attempts kept their trajectory: the reviewer page shows it step by step
            for r in lines[:len(bundles)]:
                folder = tmp / "runs" / f"{agent}-run" / agent / r.task_id / "1"
                folder.mkdir(parents=True)
                (folder / "steps.json").write_text(json.dumps([
                    {"thought": "Let me look at the registry first.", "command": "grep -rn _MODELS python/",
                     "output": "[exit code: 0]\npython/sglang/srt/models/registry.py:5:_MODELS = {...}"},
                    {"thought": "Add the new class and register it.", "command": "cat > python/x.py <<'EOF'\n…\nEOF",
                     "output": "[exit code: 0]\n"},
                    {"thought": "Done: the model is registered."}]))
                r.trial_dir = str(folder)
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


def _browser(tmp_path):
    """Headless Chromium driven by selenium (Debian's chromium + chromium-driver; scripts/setup.sh installs them)."""
    required = os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1"
    try:
        from selenium import webdriver
    except ImportError:
        if required:
            pytest.fail("SWESERVE_REQUIRE_DOCKER=1 but selenium is not installed (pip install -e '.[test]')")
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        if required:
            pytest.fail("SWESERVE_REQUIRE_DOCKER=1 but chromium/chromium-driver is not installed (scripts/setup.sh)")
        pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh installs them)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=opts)


def _full_screenshot(browser, path: Path, width: int = 1400) -> None:
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(max(height + 40, 600), 4000))
    browser.save_screenshot(str(path))


def test_board_in_headless_chromium_matches_json(results_files, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out = tmp_path / "site" / "report.html"
    cli = [sys.executable, "-m", "sweserve.cli", "report", *map(str, results_files), "--tasks", str(TASKS)]
    proc = subprocess.run([*cli, "--html", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(subprocess.run([*cli, "--json"], capture_output=True, text=True, check=True).stdout)

    page = out.read_text()
    scripts = re.findall(r"<script[^>]+src=\"([^\"]+)\"", page)
    assert scripts == ["plotly.min.js"] and (out.parent / "plotly.min.js").stat().st_size > 1_000_000
    assert len(page) < 200_000  # plotly is loaded from the file beside the page, not inlined
    assert not re.search(r"(src|href)=\"?https?:", page)  # nothing fetched to view it

    browser = _browser(tmp_path)
    try:
        browser.get(out.as_uri())
        WebDriverWait(browser, 30).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "svg.main-svg")) >= 2)
        text = {el.get_attribute("id"): el.text for el in browser.find_elements(By.CSS_SELECTOR, "[id]")}

        def pct(x):
            return "—" if x is None else f"{100 * x:.1f}%"

        # the rank order: pass@1 high to low, as the JSON has it; the chart's bars in the same order
        want = [r["agent"] for r in sorted(reports, key=lambda r: (-(r["overall"]["pass_at_1"] or 0), r["agent"]))]
        rows = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tr[id^=lb-row-]")
        assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == want
        bars = browser.execute_script("return document.getElementById('chart-leaderboard').data[0].x")
        assert list(bars) == want
        heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#leaderboard th")]
        assert sum(h.startswith("pass@1") for h in heads) == 1
        assert text["summary"].startswith("2 agents on 6 tasks")

        for rep in reports:
            a, o = rep["agent"], rep["overall"]
            assert text[f"lb-{a}-model"] == rep["model"]
            assert text[f"lb-{a}-pass_at_1_value"] == pct(o["pass_at_1"])
            assert text[f"lb-{a}-pass_at_1_stderr"] == f"±{100 * o['pass_at_1_stderr']:.1f}"
            assert text[f"lb-{a}-pass_at_k"] == pct(o["pass_at_k"])
            cost = rep["cost_per_task_usd"]
            assert text[f"lb-{a}-cost_per_task_usd"] == ("—" if cost is None else f"${cost:.4f}")
            assert text[f"lb-{a}-time_per_task_s"] == f"{rep['time_per_task_s']:.1f} s"
            for fam, rate in rep["families"].items():
                assert text[f"fam-{a}-{fam}"] == f"{pct(rate['pass_at_1'])} ({rate['scored']})"
        # every task of the matrix, every cell as the JSON says, every link resolving to its reviewer page
        tasks = [b.task.task_id for b in load_all(TASKS)]
        shown = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#matrix td.task")]
        assert shown == sorted(tasks)
        links = {}
        for rep in reports:
            for row in rep["tasks"]:
                cell = browser.find_element(By.ID, f"cell-{rep['agent']}-{row['task_id']}")
                want_text = "skipped" if row["status"] == "skipped" else \
                    f"{row['status']} {row['resolved_attempts']}/{row['attempts']}"
                assert cell.text == want_text
                href = cell.find_element(By.TAG_NAME, "a").get_attribute("href")
                assert href == (out.parent / f"reviews/{rep['agent']}/{row['task_id']}.html").as_uri()
                links[(rep["agent"], row["task_id"])] = href
        assert "alpha-run" in text["config"] and "beta.jsonl" in text["config"]
        shot = tmp_path / "board.png"
        _full_screenshot(browser, shot)
        assert shot.stat().st_size > 20_000

        # a reviewer page: real HTML, and its link back resolves to the board
        browser.get(links[("alpha", tasks[0])])
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Review: {tasks[0]}")
        assert browser.find_elements(By.CSS_SELECTOR, "#instruction h1, #instruction p")  # Markdown rendered
        assert browser.find_element(By.ID, "candidate-diff").location["y"] == \
            browser.find_element(By.ID, "oracle-diff").location["y"]  # side by side
        steps = browser.find_elements(By.CSS_SELECTOR, "#trajectory details.step")
        assert [st.find_element(By.TAG_NAME, "summary").text for st in steps] == [
            "step 1: grep -rn _MODELS python/", "step 2: cat > python/x.py <<'EOF'",
            "step 3: Done: the model is registered."]
        assert not steps[0].get_attribute("open")  # folded until clicked
        steps[0].find_element(By.TAG_NAME, "summary").click()
        assert "registry.py:5" in steps[0].text
        outcomes = browser.find_elements(By.CSS_SELECTOR, "#outcomes tr")
        assert len(outcomes) > 1 and browser.find_element(By.ID, "flags")
        _full_screenshot(browser, tmp_path / "review.png")
        assert (tmp_path / "review.png").stat().st_size > 20_000
        browser.find_element(By.ID, "back").click()
        assert browser.current_url == out.as_uri()
        for href in links.values():  # every link of the matrix opens a page that names its task
            browser.get(href)
            assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Review: ")
    finally:
        browser.quit()
    if os.environ.get("SWESERVE_UPDATE_SCREENSHOTS") == "1":  # the README's picture of the board
        shutil.copyfile(shot, ROOT / "docs" / "board.png")
        shutil.copyfile(tmp_path / "review.png", ROOT / "docs" / "review.png")
