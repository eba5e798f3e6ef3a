"""Cheap checks before any image is built: the host can hold the task, and its repository can be exported.

Building an env image takes minutes and gigabytes; finding out afterwards that the clone cannot export the
base commit wastes both. So `validate` and `run` first check, in seconds and without Docker:

- the host's resources: more CPUs than the host has is a skip (Docker refuses such a container anyway);
- the repository export: the base commit and its trees readable in the clone, and every file's object. A
  file git cannot read is left out of the task (recorded in `task.unreadable`, built as a sparse checkout)
  when no test needs it: not a hidden test file, not touched by the oracle or tests.patch, not a file the
  interpreter loads by itself (conftest.py, …), not named by the hidden test files (`named_by`). Otherwise
  the task fails (an `InfraError` of kind git) naming the file and the `exclude_paths` line that would leave
  it out.
"""

from __future__ import annotations

import json
import os
import re

from sweserve.dataset.gitio import Git, GitError
from sweserve.dataset.patches import is_interpreter_hook, touched_paths
from sweserve.errors import InfraError, TrialSkipped
from sweserve.evaluation.context import Context
from sweserve.models import TaskBundle


def host_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_resources(bundle: TaskBundle) -> None:
    cpus = host_cpus()
    if bundle.task.resources.cpus > cpus:
        raise TrialSkipped(f"needs {bundle.task.resources.cpus:g} CPUs (host has {cpus})")


def check_export(ctx: Context, bundle: TaskBundle) -> None:
    """The base commit can be exported from the clone; unreadable files no test needs are left out
    (`bundle.task.unreadable`). Without a known clone there is nothing to check here: the image must exist."""
    task = bundle.task
    clone = ctx.clone_for(task.repo)
    if clone is None:
        return
    if not (clone / ".git").exists() and not (clone / "HEAD").exists():
        raise InfraError("git", f"{clone}: not a git repository (the clone of {task.repo} to export from)")
    profile = ctx.profile(task.profile)
    try:
        with Git(clone) as g:
            unreadable = g.unreadable_blobs(task.base_commit)
            texts = _test_texts(g, task) if unreadable else []
    except GitError as exc:
        raise InfraError("git", f"cannot export {task.base_commit[:12]} from {clone}: {exc}") from None
    needed = set(task.test.files) | touched_paths(bundle.oracle_patch) | touched_paths(bundle.tests_patch)
    blocking = sorted(p for p in unreadable if not profile.is_excluded(p)
                      and (p in needed or is_interpreter_hook(p) or named_by(p, task.test.files, texts)))
    if blocking:
        path = blocking[0]
        more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
        raise InfraError("git", f"cannot export {task.base_commit[:12]} from {clone}: git cannot read {path}"
                                f"{more}: {unreadable[path]}; the task's tests or patches need it. To build the "
                                f"task without it, add to profile {profile.name}: "
                                f'"exclude_paths": [{json.dumps(path)}]')
    task.unreadable = sorted(unreadable)


def _test_texts(g: Git, task) -> list[str]:
    """The hidden test files as the tests run them (at the merge commit); an unreadable one is left out."""
    texts = []
    for path in task.test.files:
        try:
            text = g.read(task.merge_commit, path)
        except GitError:
            continue
        if text is not None:
            texts.append(text)
    return texts


# folder names too common in test code to say that a test reads the file beneath them
GENERIC_FOLDERS = {"data", "test", "tests", "testing", "testdata", "test_data", "fixtures", "assets", "resources",
                   "files", "samples", "examples", "python", "src", "inputs", "outputs"}


def named_by(path: str, test_files: list[str], texts: list[str]) -> bool:
    """Whether a hidden test file may read path: its name, stem, or a folder of it that the test files do not
    share (four characters or more) appears in their text. Generous on purpose: a file a test may need is
    never silently left out."""
    shared = {part for f in test_files for part in f.split("/")[:-1]} | GENERIC_FOLDERS
    name = path.rsplit("/", 1)[-1]
    words = {name, name.rsplit(".", 1)[0]} | {part for part in path.split("/")[:-1]
                                              if len(part) >= 4 and part.lower() not in shared}
    return any(re.search(rf"(?<![\w.-]){re.escape(w)}(?![\w-])", text) for w in words if w for text in texts)


def check_prerequisites(ctx: Context, bundle: TaskBundle) -> None:
    """Everything cheap that can stop a task before an image is built: TrialSkipped or InfraError."""
    check_resources(bundle)
    check_export(ctx, bundle)
