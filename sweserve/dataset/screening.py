"""Blind review of tasks, SWE-bench Verified style: packets a reviewer reads in order, and their verdicts.

A packet holds, per task, what a candidate sees first (`instruction.md`, and `BASE`, the base commit, to
browse the repository as a candidate could) and, apart under `evidence/`, what the reviewer reads only after
writing down what they would build: the hidden tests, the oracle and the task's facts (family, graded tests).
`RUBRIC.md` says how to judge and how to write a verdict: one JSON object per line, a `Review` (models.py).
Recorded verdicts go into task.json (`Task.reviews`); readiness drops a task at least half of its reviewers
judge BAD (`readiness.review_verdict`).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError

from sweserve.dataset.readiness import assess
from sweserve.dataset.taskstore import load_bundle, save_task
from sweserve.errors import SweserveError
from sweserve.models import Review, TaskBundle, now

RUBRIC = """# Blind review of benchmark tasks

Each task: a repository at a base commit, a problem statement (`instruction.md`, the ONLY thing a candidate
sees besides the repository), hidden tests and the reference solution. Be demanding: a smaller benchmark of
good tasks beats a larger one.

For each task folder, in this order, and never look ahead:

1. Read only `<task>/instruction.md`; you may browse the repository at the commit in `<task>/BASE`, as a
   candidate could. Write down what you would implement, which public names you would create or change, and
   what behaviour you expect a test to check.
2. Then read `<task>/evidence/`: `tests.patch` (the hidden tests), `oracle.patch` (the reference fix) and
   `facts.json` (the family and the FAIL_TO_PASS tests).
3. Judge, with a sentence of evidence each:
   - sufficient: could an honest, skilled engineer who read only the statement (and the repository) write a
     fix that passes the FAIL_TO_PASS tests? 0 (no: the tests need names or behaviour the statement does not
     give), 1 (only with lucky guesses), 2 (yes, with reasonable inference), 3 (clearly yes);
   - leak: does the statement prescribe the fix itself (code lines, a file-by-file recipe)?
   - fair_tests: do the tests check the behaviour the statement asks for (not layout, not incidental names,
     not a threshold only)?
   - family_ok: is the family right (model-support, decoding, distributed, serving-api, kernels-quant,
     scheduling-memory)? If not, family_should_be.
   - verdict: GOOD exactly when sufficient >= 2, no leak, fair tests and the family right; else BAD, with
     the main reason.
4. Append one JSON object per task, on one line, to your results file:
   {"task": "<task id>", "reviewer": "<your name>", "predicted_before_tests": "...", "sufficient": 0-3,
    "leak": false, "fair_tests": true, "family_ok": true, "family_should_be": "", "verdict": "GOOD",
    "reason": "..."}

Then `sweserve tasks review record <results file> --write` records them in the tasks.
"""


def write_packet(bundles: list[TaskBundle], out: Path) -> list[Path]:
    """One folder per task under `out`, and the rubric; returns the task folders."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "RUBRIC.md").write_text(RUBRIC)
    folders = []
    for b in bundles:
        task = b.task
        folder = out / task.task_id
        (folder / "evidence").mkdir(parents=True, exist_ok=True)
        (folder / "instruction.md").write_text(b.instruction)
        (folder / "BASE").write_text(task.base_commit + "\n")
        (folder / "evidence" / "tests.patch").write_text(b.tests_patch)
        (folder / "evidence" / "oracle.patch").write_text(b.oracle_patch)
        facts = {"task_id": task.task_id, "repo": task.repo, "pr_number": task.pr_number, "family": task.family,
                 "FAIL_TO_PASS": task.FAIL_TO_PASS, "PASS_TO_PASS": task.PASS_TO_PASS}
        (folder / "evidence" / "facts.json").write_text(json.dumps(facts, indent=2) + "\n")
        folders.append(folder)
    return folders


FUTURE_SLACK = timedelta(minutes=5)  # clocks apart


def read_verdicts(path: Path) -> list[Review]:
    """The verdicts of a results file (one JSON object per line; blank lines skipped); a bad line is one
    clear error naming the file and the line."""
    if not path.is_file():
        raise SweserveError(f"{path}: no such results file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # a traceback from `tasks review record` (R23h-5)
        raise SweserveError(f"{path}: cannot read the results file as UTF-8 text: {exc}") from None
    reviews = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            reviews.append(Review.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "line"
            raise SweserveError(f"{path} line {n}: {where}: {first['msg']}") from None
        if reviews[-1].at > now() + FUTURE_SLACK:  # a "latest" verdict no later one could replace (R23f-3)
            raise SweserveError(f"{path} line {n}: at: {reviews[-1].at.isoformat()} is in the future")
    return reviews


def record(tasks_dir: Path, reviews: list[Review], write: bool) -> dict[str, tuple[bool, str]]:
    """Each reviewed task -> (ready now, its review verdict's line); with write, the reviews (a reviewer's
    later-dated verdict replacing their earlier one) and the readiness they give are saved in task.json."""
    by_task: dict[str, list[Review]] = {}
    for r in reviews:
        by_task.setdefault(r.task, []).append(r)
    for t in by_task:  # a task id is one folder of tasks_dir, never a path out of it (R23f-4)
        if t in ("", ".", "..") or Path(t).name != t or "\\" in t:
            raise SweserveError(f"{t!r}: not a task id (one folder name in {tasks_dir})")
    missing = [t for t in by_task if not (tasks_dir / t / "task.json").is_file()]
    if missing:
        raise SweserveError(f"no task {missing[0]} in {tasks_dir}" + (f" (and {len(missing) - 1} more)"
                                                                     if len(missing) > 1 else ""))
    out = {}
    for task_id, mine in by_task.items():
        bundle = load_bundle(tasks_dir / task_id)
        task = bundle.task
        if task.task_id != task_id:
            raise SweserveError(f"{tasks_dir / task_id}: holds task {task.task_id}, not {task_id}")
        # one vote a reviewer, their latest by date, whichever file brought it: a stale file recorded late undid a
        # later verdict (R23h-4); on a tie the file being recorded wins
        latest = {r.who: r for r in sorted(task.reviews + mine, key=lambda r: r.at)}
        task.reviews = list(latest.values())
        if task.validation is not None:
            task.readiness = assess(task, bundle.instruction)
        votes = {r.who: r for r in sorted(task.reviews, key=lambda r: r.at) if r.task == task_id}  # as readiness
        good = sum(r.verdict == "GOOD" for r in votes.values())
        out[task_id] = (task.ready, f"{good} of {len(votes)} GOOD")
        if write:
            save_task(tasks_dir / task_id, task)
    return out
