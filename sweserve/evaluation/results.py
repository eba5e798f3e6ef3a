"""Results JSONL: one line per finished attempt, appended and fsynced as each ends; resumable."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from sweserve.errors import SweserveError, describe_validation_error
from sweserve.models import RunResult


def read_results(path: Path) -> list[RunResult]:
    """All complete records. A torn last line (a killed writer) is ignored; a bad line elsewhere is an error."""
    if not path.exists():
        return []
    # split leaves the text after the last newline at the end: "" or a record a killed writer never finished
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    results = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            results.append(RunResult.model_validate_json(line))
        except ValidationError as exc:
            try:
                json.loads(line)
            except json.JSONDecodeError:
                raise SweserveError(f"{path}:{n}: not a JSON record") from None
            raise SweserveError(describe_validation_error(f"{path}:{n}", exc)) from None
    return results


def latest(results: list[RunResult]) -> dict[tuple[str, str, int], RunResult]:
    """The last record of each (task, agent, attempt): a retried error is superseded, never counted twice."""
    out: dict[tuple[str, str, int], RunResult] = {}
    for r in results:
        out[r.key] = r
    return out


class ResultsWriter:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size:
            with path.open("rb+") as fh:
                data = fh.read()
                cut = data.rfind(b"\n") + 1
                if cut != len(data):  # drop a torn tail left by a killed run
                    fh.truncate(cut)

    def write(self, result: RunResult) -> None:
        line = result.model_dump_json() + "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
