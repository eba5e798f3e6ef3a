"""Patches made elsewhere, graded here: SWE-bench's predictions format as one agent per model.

A predictions file is JSONL, a JSON list, or a JSON object keyed by `instance_id`; each prediction has
`instance_id`, `model_name_or_path` and `model_patch` (SWE-bench's fields; others are ignored). A
`PredictionsAgent` applies its patch in the candidate sandbox with `git apply`, like the oracle; the trial
then takes the submission and grades it like any other agent's, so results, resume and reports are the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from sweserve.agents.base import PatchError, TaskImageAgent, apply_patch
from sweserve.environment.sandbox import Sandbox
from sweserve.errors import SweserveError
from sweserve.loading import read_text, validate
from sweserve.models import AgentRun, TaskBundle

NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class Prediction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    instance_id: str = Field(min_length=1)
    model_name_or_path: str = Field(min_length=1)
    model_patch: str | None = None  # SWE-bench writes null when a model produced nothing


def agent_name(model_name_or_path: str) -> str:
    """A model name as an agent name: runs of other characters become '-' ("org/model v2" → "org-model-v2")."""
    return NOT_NAME.sub("-", model_name_or_path.strip()).strip("-.") or "predictions"


def _records(path: Path) -> list:
    text = read_text(path, "predictions file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
        records = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SweserveError(f"{path}:{number}: not JSON ({exc.msg}); expected JSONL, a JSON list, "
                                        "or a JSON object keyed by instance_id") from None
        return records
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "instance_id" in data:  # a JSONL file holding one prediction
        return [data]
    if isinstance(data, dict):
        return [{"instance_id": key, **value} if isinstance(value, dict) else value for key, value in data.items()]
    raise SweserveError(f"{path}: expected JSONL, a JSON list, or a JSON object keyed by instance_id")


def load_predictions(path: Path) -> list[Prediction]:
    predictions = []
    for index, record in enumerate(_records(path), 1):
        predictions.append(validate(Prediction, record, f"{path}: prediction {index}"))
    if not predictions:
        raise SweserveError(f"{path}: no predictions")
    return predictions


class PredictionsAgent(TaskImageAgent):
    """One model's predictions: solving a task applies the model's patch for it."""

    def __init__(self, name: str, model: str, patches: dict[str, str]):
        self.name, self.model, self.patches = name, model, patches

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.patches, sort_keys=True).encode()).hexdigest()[:16]

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        patch = self.patches.get(bundle.task.task_id, "")
        run = AgentRun(agent=self.name, model=self.model, exit_code=0)
        if not patch.strip():
            return run  # nothing to apply: the empty submission fails as "empty patch"
        try:
            apply_patch(box, patch, "prediction")
        except PatchError as exc:
            return run.model_copy(update={"exit_code": exc.exit_code, "exit_reason": "patch_failed",
                                          "log_tail": str(exc)})
        return run


class PredictionSet:
    """A predictions file split by model, with what cannot be graded said once instead of failing the run."""

    def __init__(self, predictions: list[Prediction], known_task_ids: set[str]):
        from sweserve.reporting.swebench_report import swebench_model_name

        by_model: dict[str, dict[str, str]] = {}
        names: dict[str, str] = {}
        reports: dict[str, str] = {}
        for p in predictions:
            name = agent_name(p.model_name_or_path)
            if names.setdefault(name, p.model_name_or_path) != p.model_name_or_path:
                raise SweserveError(f"models {names[name]!r} and {p.model_name_or_path!r} both become agent name "
                                    f"{name!r}: rename one in the predictions file")
            # each model's SWE-bench report is `<model>.<run id>.json`: two models of one name there, the second's
            # replaced the first's (red team 23b, R23b-4)
            report = swebench_model_name(p.model_name_or_path)
            if reports.setdefault(report, p.model_name_or_path) != p.model_name_or_path:
                raise SweserveError(f"models {reports[report]!r} and {p.model_name_or_path!r} would both write the "
                                    f"report {report}.<run id>.json: rename one in the predictions file")
            patches = by_model.setdefault(p.model_name_or_path, {})
            if p.instance_id in patches:
                raise SweserveError(f"{p.instance_id} is predicted twice for model {p.model_name_or_path!r}")
            patches[p.instance_id] = p.model_patch or ""
        self.agents = [PredictionsAgent(agent_name(model), model, patches) for model, patches in by_model.items()]
        self.unknown = sorted({p.instance_id for p in predictions} - known_task_ids)
        self.empty = sorted({p.instance_id for p in predictions if not (p.model_patch or "").strip()}
                            - set(self.unknown))

    def task_ids(self, agent: PredictionsAgent) -> set[str]:
        return set(agent.patches) - set(self.unknown)
