"""Reading and writing tasks under tasks/<task_id>/ (task.json, instruction.md, oracle.patch, tests.patch)."""

from __future__ import annotations

from pathlib import Path

from sweserve.errors import SweserveError
from sweserve.loading import read_data, read_text, validate, write_atomic
from sweserve.models import Task, TaskBundle

TASK_FILE = "task.json"
TEXT_FILES = {"instruction": "instruction.md", "oracle_patch": "oracle.patch", "tests_patch": "tests.patch"}


def save_task(task_dir: Path, task: Task) -> None:
    task_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(task_dir / TASK_FILE, task.model_dump_json(indent=2) + "\n")


def save_bundle(tasks_dir: Path, bundle: TaskBundle) -> Path:
    task_dir = tasks_dir / bundle.task.task_id
    task_dir.mkdir(parents=True, exist_ok=True)
    for attr, name in TEXT_FILES.items():
        write_atomic(task_dir / name, getattr(bundle, attr))
    save_task(task_dir, bundle.task)
    return task_dir


def load_task(task_dir: Path) -> Task:
    path = task_dir / TASK_FILE
    task = validate(Task, read_data(path, "JSON", "task file"), path)
    if task.task_id != task_dir.name:
        raise SweserveError(f"{path}: field 'task_id': '{task.task_id}' does not match its folder '{task_dir.name}'")
    return task


def load_bundle(task_dir: Path) -> TaskBundle:
    task = load_task(task_dir)
    texts = {}
    for attr, name in TEXT_FILES.items():
        texts[attr] = read_text(task_dir / name, "task file")
    if not texts["oracle_patch"].strip():
        raise SweserveError(f"{task_dir / TEXT_FILES['oracle_patch']}: empty oracle patch")
    if not texts["tests_patch"].strip():
        raise SweserveError(f"{task_dir / TEXT_FILES['tests_patch']}: empty tests patch")
    return TaskBundle(task=task, **texts)


def task_dirs(tasks_dir: Path) -> list[Path]:
    if not tasks_dir.is_dir():
        raise SweserveError(f"{tasks_dir}: no such tasks folder")
    return sorted(p for p in tasks_dir.iterdir() if p.is_dir() and (p / TASK_FILE).exists())


def load_all(tasks_dir: Path) -> list[TaskBundle]:
    return [load_bundle(d) for d in task_dirs(tasks_dir)]


def readable_tasks(tasks_dir: Path) -> list[Task]:
    """Every task.json in tasks_dir that loads; the others are left to the commands that need them."""
    tasks = []
    for d in task_dirs(tasks_dir):
        try:
            tasks.append(load_task(d))
        except SweserveError:
            continue
    return tasks


def select(tasks_dir: Path, ids: list[str] | None) -> list[TaskBundle]:
    """The named tasks (all of them when ids is empty); an unknown id is an error."""
    if not ids:
        return load_all(tasks_dir)
    known = {d.name: d for d in task_dirs(tasks_dir)}
    missing = [i for i in ids if i not in known]
    if missing:
        raise SweserveError(f"unknown task: {missing[0]} (not in {tasks_dir})")
    return [load_bundle(known[i]) for i in dict.fromkeys(ids)]  # each once, however often named (R16b-4)
