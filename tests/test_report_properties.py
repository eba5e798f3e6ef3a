"""Reports never crash on data: every status the results model allows, random results files, the files given."""

import io
import json
import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from rich.console import Console

from sweserve.agents.reference import NullAgent, OracleAgent
from sweserve.errors import SweserveError
from sweserve.evaluation.evaluate import write_manifest
from sweserve.evaluation.results import read_results
from sweserve.models import FAMILIES, STATUSES, AgentRun, RunResult, TestResults
from sweserve.reporting.html import write_html_report
from sweserve.reporting.summary import MISSING, build_reports, read_manifests, render

T0 = datetime(2026, 2, 1, tzinfo=timezone.utc)


def record(task_id, status, agent="a", attempt=1, family="decoding", run_id="r1", flags=(), cost=None):
    return RunResult(run_id=run_id, task_id=task_id, family=family, agent=agent, attempt=attempt, status=status,
                     reason=None if status in ("resolved", "failed") else f"why {status} <b>&",
                     tests=TestResults(fail_to_pass={"t.py::x": "passed" if status == "resolved" else "failed"}),
                     flags=list(flags), agent_run=AgentRun(agent=agent, cost_usd=cost, wall_s=1.5),
                     started_at=T0, finished_at=T0 + timedelta(seconds=3), duration_s=3.0)


def manifest(root: Path, run_id: str, agent: str, tasks: dict[str, str], attempts=1, results: str | None = None):
    path = root / "runs" / run_id / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"run_id": run_id, "agent": agent, "attempts": attempts, "tasks": {t: "h" for t in tasks},
            "families": tasks}
    if results is not None:
        data["results"] = results
    path.write_text(json.dumps(data))


def text_of(reports) -> str:
    buf = io.StringIO()
    render(reports, Console(file=buf, width=200))
    return buf.getvalue()


def every_format(reports, results, tmp_path) -> tuple[str, str, str]:
    out = write_html_report(reports, results, {}, tmp_path / "site" / "report.html")
    return text_of(reports), json.dumps([r.model_dump() for r in reports]), out.read_text()


def test_every_status_the_model_allows_renders_in_text_json_and_html(tmp_path):
    """Iterates over the results model's own list: a status added later cannot be forgotten by a format."""
    results = [record(f"o__r-{i}", status) for i, status in enumerate(STATUSES)]
    tasks = {r.task_id: r.family for r in results} | {"o__r-missing": "decoding"}
    manifest(tmp_path, "r1", "a", tasks, results="a.jsonl")
    (rep,) = build_reports(results, read_manifests(tmp_path / "runs", "a.jsonl", {"a"}))
    assert set(rep.statuses) == {*STATUSES, MISSING}
    assert all(rep.statuses[s] == 1 for s in (*STATUSES, MISSING))
    text, js, page = every_format([rep], results, tmp_path)
    for status in (*STATUSES, MISSING):
        assert status in text and f'"{status}"' in js and f">{status}<" in page, status


def random_run(rng: random.Random, root: Path, n: int) -> tuple[list[Path], list[RunResult]]:
    """Random results files in one folder: several agents and attempts, any status, records left out."""
    files, everything = [], []
    tasks = {f"o__r-{i}": rng.choice(FAMILIES) for i in range(rng.randint(1, 7))}
    for a in range(rng.randint(1, 3)):
        agent = f"agent-{n}-{a}"
        attempts = rng.randint(1, 3)
        chosen = dict(rng.sample(sorted(tasks.items()), rng.randint(1, len(tasks))))
        lines = []
        for task_id, family in chosen.items():
            for attempt in range(1, attempts + 1):
                if rng.random() < 0.3:
                    continue  # a crashed run: this (task, attempt) has no record
                for _ in range(rng.choice([1, 1, 2])):  # a retried attempt: the later record wins
                    lines.append(record(task_id, rng.choice(STATUSES), agent, attempt, family, f"run-{n}-{a}",
                                        flags=rng.choice([(), ("secret_in_submission",)]),
                                        cost=rng.choice([None, 0.01])))
        path = root / f"{agent}.jsonl"
        path.write_text("".join(r.model_dump_json() + "\n" for r in lines))
        manifest(root, f"run-{n}-{a}", agent, chosen, attempts, results=path.name)
        files.append(path)
        everything += lines
    return files, everything


@pytest.mark.parametrize("seed", range(40))
def test_random_results_files_render_in_every_format(tmp_path, seed):
    rng = random.Random(seed)
    files, everything = random_run(rng, tmp_path, seed)
    for path in files:
        results = read_results(path)
        agents = {r.agent for r in results}
        selected = read_manifests(tmp_path / "runs", path.name, agents)
        reports = build_reports(results, selected)
        assert [r.agent for r in reports] == [path.stem]  # exactly this file's agent
        (rep,) = reports
        assert sum(rep.statuses.values()) == rep.overall.tasks == len(rep.tasks)
        assert rep.overall.pass_at_1 is None or 0 <= rep.overall.pass_at_1 <= 1
        text, js, page = every_format(reports, results, tmp_path / path.stem)
        for row in rep.tasks:
            assert row.task_id in text and row.task_id in page and f'id="cell-{rep.agent}-{row.task_id}"' in page
    reports = build_reports(everything, {a: s for p in files for a, s in
                                         read_manifests(tmp_path / "runs", p.name, {p.stem}).items()})
    every_format(reports, everything, tmp_path / "all")


def test_report_given_one_file_reports_only_its_agents(tmp_path):
    """Files sharing a folder share runs/: the manifests of other files' runs must not join the report."""
    a, b = tmp_path / "oracle.jsonl", tmp_path / "null.jsonl"
    a.write_text(record("o__r-1", "resolved", "oracle", run_id="ra").model_dump_json() + "\n")
    b.write_text(record("o__r-1", "failed", "null", run_id="rb").model_dump_json() + "\n")
    manifest(tmp_path, "ra", "oracle", {"o__r-1": "decoding"}, results="oracle.jsonl")
    manifest(tmp_path, "rb", "null", {"o__r-1": "decoding"}, results="null.jsonl")
    manifest(tmp_path, "old", "someone", {"o__r-1": "decoding"})  # before manifests named their file
    manifest(tmp_path, "old2", "oracle", {"o__r-2": "decoding"})  # ... of this file's own agent: counts
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(a), "--json"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["agent"] for r in data] == ["oracle"]
    assert {t["task_id"]: t["status"] for t in data[0]["tasks"]} == {"o__r-1": "resolved", "o__r-2": MISSING}
    out = tmp_path / "site" / "board.html"
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(a), str(b), "--html", str(out)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "someone" not in out.read_text()


def test_a_run_id_names_one_agent_and_one_results_file(tmp_path):
    out = tmp_path / "results" / "oracle.jsonl"
    path = write_manifest(out, "run1", OracleAgent(), [])
    data = json.loads(path.read_text())
    assert data["agent"] == "oracle" and data["results"] == "oracle.jsonl"
    write_manifest(out, "run1", OracleAgent(), [])  # the same run resumed
    with pytest.raises(SweserveError, match="run id run1 is already used by agent oracle"):
        write_manifest(tmp_path / "results" / "null.jsonl", "run1", NullAgent(), [])


def test_reviewer_pages_find_trial_folders_beside_the_results_file(tmp_path):
    """A run records its trial folders relative to where it ran; the board is often made elsewhere."""
    results = tmp_path / "results"
    tasks = Path(__file__).resolve().parent.parent / "tasks"
    task = sorted(p.name for p in tasks.iterdir() if (p / "task.json").is_file())[0]
    r = record(task, "failed", "cmd", run_id="r9")
    r.trial_dir = f"results/runs/r9/cmd/{task}/1"  # relative to a folder the report is not run from
    folder = results / "runs" / "r9" / "cmd" / task / "1"
    folder.mkdir(parents=True)
    (folder / "steps.json").write_text(json.dumps([{"thought": "look", "command": "ls /testbed", "output": "x"}]))
    (results / "cmd.jsonl").write_text(r.model_dump_json() + "\n")
    site = tmp_path / "site"
    site.mkdir()
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(results / "cmd.jsonl"), "--tasks",
                           str(tasks), "--html", "board.html"], capture_output=True, text=True, cwd=site)
    assert proc.returncode == 0, proc.stderr
    page = (site / "reviews" / "cmd" / f"{task}.html").read_text()
    assert "step 1: ls /testbed" in page


def test_reviewer_page_renders_the_instruction_and_escapes_what_the_candidate_wrote(tmp_path):
    from sweserve.dataset.taskstore import load_all
    from sweserve.reporting.review import review_html

    bundle = load_all(Path(__file__).resolve().parent.parent / "tasks")[0]
    bundle = bundle.model_copy(update={"instruction": "# Title\n\nUse `x`.\n<!-- sweserve:interface -->\n"
                                                      "<script>alert(1)</script>\n<!-- /sweserve:interface -->\n"})
    r = record(bundle.task.task_id, "tampered", flags=("secret_in_submission",))
    r.model_patch = "diff --git a/x b/x\n+<img src=x onerror=alert(1)>\n"
    page = review_html(bundle, r, board="../../board.html")
    assert "<h1>Title</h1>" in page and "<code>x</code>" in page and "sweserve:interface" not in page
    assert "<script>alert" not in page and "<img src=x" not in page
    assert '<a id="back" href="../../board.html">' in page and "flagged: secret_in_submission" in page


def test_a_huge_trajectory_is_shown_in_part():
    from sweserve.models import TrajectoryStep
    from sweserve.reporting.review import MAX_STEPS_SHOWN, trajectory_html

    page = trajectory_html([TrajectoryStep(command=f"echo {i}") for i in range(MAX_STEPS_SHOWN + 100)])
    assert page.count("<details") == MAX_STEPS_SHOWN and "100 more steps" in page
