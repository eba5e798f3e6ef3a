"""A run's manifest (`runs/<run_id>/manifest.json`) has one model (`models.RunManifest`) and one reader
(`results.read_manifest`), used by resume (`evaluate`), reports (`summary.read_manifests`) and the hiring
scorecard (`scorecard.pack_attempts`): each parsed the file by hand before, and their readings could differ."""

from __future__ import annotations

import json

import pytest
from test_results_report import bundle

from sweserve.agents.reference import NullAgent
from sweserve.errors import SweserveError
from sweserve.evaluation.evaluate import next_attempt, run_id_taken, write_manifest
from sweserve.evaluation.results import manifest_or_none, read_manifest


def _agent(name: str = "a") -> NullAgent:
    agent = NullAgent()
    agent.name = name
    return agent


def test_written_manifest_reads_back_and_a_resume_keeps_its_start(tmp_path):
    out = tmp_path / "results.jsonl"
    path = write_manifest(out, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")], attempts=2)
    first = read_manifest(path)
    assert (first.run_id, first.agent, first.results, first.attempts) == ("R", "a", "results.jsonl", 2)
    assert set(first.tasks) == {"o__r-1", "o__r-2"} and first.started_at is not None
    assert first.started_at.tzinfo is not None  # the scorecard orders sessions by it
    write_manifest(out, "R", _agent(), [bundle("o__r-3")], attempts=3)
    again = read_manifest(path)
    assert again.started_at == first.started_at
    assert {t: again.attempts_for(t) for t in again.tasks} == {"o__r-1": 2, "o__r-2": 2, "o__r-3": 3}
    assert again.attempts_for("o__r-9") == 0


def test_a_manifest_from_before_reads_with_defaults(tmp_path):
    """No run id (its folder names it), no results file, `null` where a container belongs, names that are not
    strings in `unready`, and per-task counts of tasks it never selected."""
    path = tmp_path / "runs" / "old-run" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"agent": "a", "attempts": 2, "tasks": {"t1": "h", "t2": None},
                                "per_task": {"t1": 3, "zz": 9}, "families": None, "unready": ["t2", 7, "zz"],
                                "added_later": {"x": 1}}))
    m = read_manifest(path)
    assert (m.run_id, m.results, m.started_at, m.families) == ("old-run", None, None, {})
    assert m.per_task == {"t1": 3} and m.unready == ["t2"]
    assert (m.attempts_for("t1"), m.attempts_for("t2")) == (3, 2)


@pytest.mark.parametrize("text", ["", "[]", "{\"agent\": \"a\"}", "{\"agent\": \"a\", \"tasks\": [\"t\"]}",
                                  "{\"agent\": \"a\", \"tasks\": {}, \"attempts\": 0}",
                                  "{\"agent\": \"a\", \"tasks\": {}, \"per_task\": {\"t\": \"x\"}}",
                                  "{\"agent\": 5, \"tasks\": {}}"])
def test_what_is_not_a_manifest_is_one_clear_error(tmp_path, text):
    path = tmp_path / "runs" / "R" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(SweserveError, match=r"manifest.json: not a run manifest$"):
        read_manifest(path)
    assert manifest_or_none(path) is None
    assert manifest_or_none(tmp_path / "runs" / "none" / "manifest.json") is None
    # resume refuses it as the report does: read as none, its id was free and a resume overwrote what it had
    # selected (red team 20d, R20d-1)
    with pytest.raises(SweserveError, match=r"manifest.json: not a run manifest: "):
        run_id_taken(tmp_path / "results.jsonl", "R", "a")
    with pytest.raises(SweserveError, match=r"manifest.json: not a run manifest: "):
        next_attempt(tmp_path / "results.jsonl", "a", "t")


def test_run_ids_and_attempts_from_one_reader(tmp_path):
    out = tmp_path / "results.jsonl"
    write_manifest(out, "R", _agent("alice"), [bundle("o__r-1")], attempts=2)
    assert run_id_taken(out, "R", "bob") == "agent alice"
    assert run_id_taken(tmp_path / "other.jsonl", "R", "alice") == "results file results.jsonl"
    assert run_id_taken(out, "R", "alice") is None
    assert next_attempt(out, "alice", "o__r-1") == 3  # the killed session's attempts 1 and 2 stay its own
    assert next_attempt(out, "alice", "o__r-2") == 1
    assert next_attempt(tmp_path / "other.jsonl", "alice", "o__r-1") == 1
