"""One folder per trial, `runs/<run_id>/<agent>/<task_id>/<attempt>/`, beside the results index.

It holds what is too big or too private for the index line: the agent's log, the full test output, the
submission patch, each hidden test's outcome (`outcomes.json`), a traceback when sweserve itself failed, and
`result.json` (the SWE-bench and Harbor
convention). `results.jsonl` stays the index of all trials.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sweserve.loading import read_found_text, write_atomic
from sweserve.models import RunResult

RESULT_FILE = "result.json"
OUTCOMES_FILE = "outcomes.json"  # each hidden test's outcome, as the verifier read it


def results_home(results_path: Path) -> Path:
    """The results file as every name of it finds it: followed through symbolic links (to the file, or to a folder
    above it), so its runs folder and the name its manifests record are the file's own. A run through a link in
    another folder wrote its manifest beside the link: the report of the file by its own name had no selection for
    that run, and a resume by that name found the run id free (red team 21b, R21b-5). A path with no link in it is
    kept as given."""
    real = Path(os.path.realpath(results_path))
    return results_path if real == Path(os.path.abspath(results_path)) else real


def runs_root(results_path: Path) -> Path:
    return results_home(results_path).parent / "runs"


@dataclass(frozen=True)
class TrialFolder:
    path: Path

    @classmethod
    def for_trial(cls, results_path: Path, run_id: str, agent: str, task_id: str, attempt: int) -> "TrialFolder":
        return cls(runs_root(results_path) / run_id / agent / task_id / str(attempt))

    def write(self, name: str, text: str) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        return write_atomic(self.path / name, text)

    def write_result(self, result: RunResult) -> Path:
        return self.write(RESULT_FILE, result.model_dump_json(indent=2) + "\n")


def _same_trial(a: RunResult, b: RunResult) -> bool:
    return (a.run_id, a.agent, a.task_id, a.attempt, a.started_at, a.finished_at, a.status) == \
        (b.run_id, b.agent, b.task_id, b.attempt, b.started_at, b.finished_at, b.status)


def plain_name(name: str) -> bool:
    """Whether name is one folder name any file system here holds: no separator, NUL, `.` or `..`, at most 255
    bytes."""
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name and len(os.fsencode(name)) <= 255


def folder_of(results_path: Path, result: RunResult) -> Path | None:
    """The trial folder that holds `result`'s evidence, beside its results file: the one whose `result.json` is
    that record, its own folder or one a later try of the same run moved aside (`<attempt>.earlier-<n>`,
    `evaluate.set_aside`); without one that says so (a folder from before result.json), its own folder if there.
    A retry killed before its result left the earlier record in the index and its own partial folder in the
    record's place: the reviewer was shown the killed try's files, and the recorded trial's on no page (red team
    20d, R20d-2)."""
    # only where each name is one plain folder name: a run id too long for one (or a NUL) raised from the look-up and
    # `report` crashed, and a task id of `..`s took a folder outside runs/ for the trial's (red team 23q, R23q-4)
    if not all(plain_name(name) for name in (result.run_id, result.agent, result.task_id)):
        return None
    own = TrialFolder.for_trial(results_path, result.run_id, result.agent, result.task_id, result.attempt).path
    for folder in [own, *sorted(own.parent.glob(f"{own.name}.earlier-*"))] if own.parent.is_dir() else []:
        try:
            there = RunResult.model_validate_json(read_found_text(folder / RESULT_FILE))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if _same_trial(there, result):
            return folder
    return own if own.is_dir() and not own.with_name(f"{own.name}.earlier-1").exists() else None
