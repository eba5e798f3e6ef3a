"""One folder per trial, `runs/<run_id>/<agent>/<task_id>/<attempt>/`, beside the results index.

It holds what is too big or too private for the index line: the agent's log, the full test output, the
submission patch, each hidden test's outcome (`outcomes.json`), a traceback when sweserve itself failed, and
`result.json` (the SWE-bench and Harbor
convention). `results.jsonl` stays the index of all trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweserve.loading import write_atomic
from sweserve.models import RunResult

RESULT_FILE = "result.json"
OUTCOMES_FILE = "outcomes.json"  # each hidden test's outcome, as the verifier read it


def runs_root(results_path: Path) -> Path:
    return results_path.parent / "runs"


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
