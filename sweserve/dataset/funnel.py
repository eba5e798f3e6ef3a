"""The funnel: candidates → tasks → valid → ready, with every drop counted by reason.

- candidates: the PRs the last `mine` of each repository considered (kept in `<tasks>/.funnel/`), and
  mining's rejections by reason;
- tasks: the task folders whose task.json loads;
- valid: validation kept them; the others by `not_validated` or `rejected:<category>` (`needs_accelerator`
  among them);
- ready: the readiness checks (`readiness.py`), assessed now from what is recorded; a task dropped for
  several reasons counts under each.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from sweserve.dataset.readiness import assess
from sweserve.dataset.taskstore import TEXT_FILES, load_task, save_task, task_dirs
from sweserve.errors import SweserveError
from sweserve.loading import write_atomic
from sweserve.models import Task

RECORDS = ".funnel"


class MineRecord(BaseModel):
    """What the last `mine` of a repository considered and dropped."""

    repo: str
    candidates: int = 0
    tasks: list[str] = Field(default_factory=list)
    rejected: dict[str, int] = Field(default_factory=dict)


class Stage(BaseModel):
    stage: str
    count: int
    dropped: dict[str, int] = Field(default_factory=dict, description="reason -> tasks (or PRs) dropped on the "
                                    "way from the stage before to this one")


class Funnel(BaseModel):
    stages: list[Stage]
    not_ready: dict[str, list[str]] = Field(default_factory=dict, description="task id -> why not ready")
    notes: list[str] = Field(default_factory=list)


def _record_path(tasks_dir: Path, repo: str) -> Path:
    return tasks_dir / RECORDS / (repo.replace("/", "__") + ".json")


def save_mine_record(tasks_dir: Path, repo: str, candidates: int, tasks: list[str],
                     rejected: dict[str, list[str]]) -> Path:
    path = _record_path(tasks_dir, repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = MineRecord(repo=repo, candidates=candidates, tasks=sorted(set(tasks)),
                        rejected={k: len(v) for k, v in sorted(rejected.items())})
    return write_atomic(path, record.model_dump_json(indent=2) + "\n")


def mine_records(tasks_dir: Path) -> list[MineRecord]:
    folder = tasks_dir / RECORDS
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records.append(MineRecord.model_validate(json.loads(path.read_text())))
        except (ValueError, OSError):
            continue
    return records


def compute(tasks_dir: Path, write: bool = False) -> Funnel:
    """The funnel of a tasks folder; write: record each task's readiness as assessed now."""
    notes: list[str] = []
    tasks: list[Task] = []
    unreadable = 0
    for d in task_dirs(tasks_dir):
        try:
            tasks.append(load_task(d))
        except SweserveError:
            unreadable += 1
    records = mine_records(tasks_dir)
    if records:
        candidates = sum(r.candidates for r in records)
        mined: Counter = Counter()
        for r in records:
            mined.update(r.rejected)
    else:
        candidates = len(tasks) + unreadable
        mined = Counter()
        notes.append("no mining record in this tasks folder (mine writes one): candidates counted as tasks")
    valid_drops: Counter = Counter()
    if unreadable:
        valid_drops["task_unreadable"] = unreadable
    valid = []
    for task in tasks:
        if task.validated:
            valid.append(task)
        elif task.validation is None:
            valid_drops["not_validated"] += 1
        else:
            valid_drops[f"rejected:{task.validation.category or 'other'}"] += 1
    ready_drops: Counter = Counter()
    not_ready: dict[str, list[str]] = {}
    ready = reviewed = 0
    for task in valid:
        text = tasks_dir / task.task_id / TEXT_FILES["instruction"]
        readiness = assess(task, text.read_text(encoding="utf-8") if text.is_file() else None)
        if write and readiness.model_dump(exclude={"assessed_at"}) != (
                task.readiness.model_dump(exclude={"assessed_at"}) if task.readiness else None):
            task.readiness = readiness
            save_task(tasks_dir / task.task_id, task)
        if readiness.ready:
            ready += 1
            reviewed += readiness.checks.get("reviewed_good", False)
            continue
        keys = sorted({r.key for r in readiness.reasons})
        ready_drops.update(keys)
        not_ready[task.task_id] = [r.detail for r in readiness.reasons]
    stages = [
        Stage(stage="candidates", count=candidates),
        Stage(stage="tasks", count=len(tasks) + unreadable, dropped=dict(mined.most_common())),
        Stage(stage="valid", count=len(valid), dropped=dict(valid_drops.most_common())),
        Stage(stage="ready", count=ready, dropped=dict(ready_drops.most_common())),
    ]
    if ready:
        notes.append(f"{reviewed} of {ready} ready tasks have a blind review most reviewers judged GOOD "
                     "(`sweserve tasks review`)")
    return Funnel(stages=stages, not_ready=not_ready, notes=notes)
