"""Grading predictions made elsewhere (SWE-bench's format): parsing every shape, then real grading in Docker."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweserve.agents.predictions import Prediction, PredictionsAgent, PredictionSet, agent_name, load_predictions
from sweserve.dataset.taskstore import load_all
from sweserve.errors import SweserveError
from sweserve.evaluation.results import read_results
from sweserve.reporting.summary import build_reports

PREDS = [
    {"instance_id": "a__b-1", "model_name_or_path": "org/model v2", "model_patch": "diff --git a/x b/x\n"},
    {"instance_id": "a__b-2", "model_name_or_path": "org/model v2", "model_patch": None, "extra": 1},
]


def write(path, shape, preds=PREDS):
    if shape == "jsonl":
        path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    elif shape == "list":
        path.write_text(json.dumps(preds))
    else:  # keyed by instance_id, the id repeated or not
        path.write_text(json.dumps({p["instance_id"]: {k: v for k, v in p.items() if k != "instance_id"}
                                    for p in preds}))
    return path


@pytest.mark.parametrize("shape", ["jsonl", "list", "dict"])
def test_every_shape_loads_the_same(tmp_path, shape):
    preds = load_predictions(write(tmp_path / "p", shape))
    assert [(p.instance_id, p.model_name_or_path, p.model_patch) for p in preds] == [
        ("a__b-1", "org/model v2", "diff --git a/x b/x\n"), ("a__b-2", "org/model v2", None)]


def test_a_single_jsonl_line_is_one_prediction(tmp_path):
    assert len(load_predictions(write(tmp_path / "p", "jsonl", PREDS[:1]))) == 1


@pytest.mark.parametrize("text, needle", [
    ('{"instance_id": "a__b-1", "model_name_or_path": "m"}\n{oops\n', "p:2: not JSON"),
    ('[{"instance_id": "a__b-1"}]', "prediction 1: field 'model_name_or_path'"),
    ("[]", "no predictions"),
    ('"text"', "expected JSONL"),
])
def test_bad_files_are_one_line_errors(tmp_path, text, needle):
    (tmp_path / "p").write_text(text)
    with pytest.raises(SweserveError, match=needle):
        load_predictions(tmp_path / "p")


def test_agent_names_follow_the_agent_name_pattern():
    assert agent_name("org/model v2") == "org-model-v2"
    assert agent_name("/models/Qwen3-8B/") == "models-Qwen3-8B"
    assert agent_name("///") == "predictions"


def test_prediction_set_splits_models_and_lists_what_cannot_be_graded():
    load = [*PREDS, {"instance_id": "zz__unknown-9", "model_name_or_path": "other", "model_patch": "p"},
                    {"instance_id": "a__b-1", "model_name_or_path": "other", "model_patch": ""}]
    s = PredictionSet([Prediction.model_validate(p) for p in load], {"a__b-1", "a__b-2"})
    assert [a.name for a in s.agents] == ["org-model-v2", "other"]
    assert s.unknown == ["zz__unknown-9"] and s.empty == ["a__b-1", "a__b-2"]
    assert s.task_ids(s.agents[1]) == {"a__b-1"}


def test_prediction_set_refuses_ambiguity():
    twice = [Prediction.model_validate(PREDS[0])] * 2
    with pytest.raises(SweserveError, match="predicted twice"):
        PredictionSet(twice, set())
    clash = [Prediction(instance_id="a__b-1", model_name_or_path=m, model_patch="p") for m in ("a/b", "a b")]
    with pytest.raises(SweserveError, match="both become agent name 'a-b'"):
        PredictionSet(clash, set())


def test_config_hash_is_the_hash_of_the_patches():
    a, b, c = (PredictionsAgent("m", "m", p) for p in ({"t": "x"}, {"t": "x"}, {"t": "y"}))
    assert a.config_hash() == b.config_hash() != c.config_hash()


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_cli_refuses_agent_and_predictions_together(tmp_path):
    proc = cli("run", "--agent", "null", "--predictions", "p.jsonl", cwd=tmp_path)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_oracle_predictions_resolve_all_and_empty_ones_none(demo, tmp_path):
    bundles = load_all(demo.tasks)
    ids = [b.task.task_id for b in bundles]
    preds = [{"instance_id": b.task.task_id, "model_name_or_path": "acme/oracle-v1", "model_patch": b.oracle_patch}
             for b in bundles]
    preds += [{"instance_id": i, "model_name_or_path": "empty", "model_patch": ""} for i in ids[1:]]
    preds += [{"instance_id": ids[0], "model_name_or_path": "empty", "model_patch": "diff --git a/nope b/nope\n"
               "--- a/nope\n+++ b/nope\n@@ -1 +1 @@\n-x\n+y\n"},
              {"instance_id": "sweserve-demo__unknown-1", "model_name_or_path": "empty", "model_patch": "x"}]
    out = tmp_path / "graded.jsonl"
    common = ["--tasks", str(demo.tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
              "--output", str(out), "--workers", "2", "--timeout", "300"]
    path = write(tmp_path / "preds.jsonl", "jsonl", preds)
    proc = cli("run", "--predictions", str(path), *common, "--run-id", "nightly", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 predictions name no task" in proc.stdout and "sweserve-demo__unknown-1" in proc.stdout
    # SWE-bench's final reports, one per model, named as swebench names them; one run id per model
    oracle = json.loads((tmp_path / "acme__oracle-v1.nightly.json").read_text())
    assert oracle["resolved_ids"] == sorted(ids) and oracle["resolved_instances"] == 6
    empty = json.loads((tmp_path / "empty.nightly.json").read_text())
    assert empty["empty_patch_ids"] == sorted(ids[1:]) and empty["error_ids"] == [ids[0]]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["nightly-acme-oracle-v1", "nightly-empty"]
    from sweserve.cli.run import with_timeout

    want = {b.task.task_id: with_timeout(b, 300).content_hash() for b in bundles}
    assert all(r.task_hash == want[r.task_id] for r in read_results(out))  # graded under --timeout's limits
    assert "5 predictions have an empty patch" in proc.stdout
    results = read_results(out)
    by_agent = {name: [r for r in results if r.agent == name] for name in ("acme-oracle-v1", "empty")}
    assert len(by_agent["acme-oracle-v1"]) == 6 and all(r.status == "resolved" for r in by_agent["acme-oracle-v1"])
    statuses = {r.task_id: (r.status, r.reason) for r in by_agent["empty"]}
    assert statuses.pop(ids[0])[0] == "patch_failed"
    assert set(statuses.values()) == {("failed", "empty patch")} and len(statuses) == 5
    reports = {rep.agent: rep.overall.pass_at_1 for rep in build_reports(results)}
    assert reports == {"acme-oracle-v1": 1.0, "empty": 0.0}
    assert all(r.agent_run.model == "acme/oracle-v1" for r in by_agent["acme-oracle-v1"])
    again = cli("run", "--predictions", str(path), *common, cwd=tmp_path)  # resumed: nothing left to do
    assert again.returncode == 0 and len(read_results(out)) == 12
    path.write_text(path.read_text().replace('"model_patch": ""', '"model_patch": " "', 1))
    changed = cli("run", "--predictions", str(path), *common, cwd=tmp_path)
    assert changed.returncode == 2 and "agent empty's config changed" in changed.stderr


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("shape", ["list", "dict"])
def test_other_shapes_grade_the_same(demo, tmp_path, shape):
    (bundle,) = [b for b in load_all(demo.tasks) if b.task.family == "distributed"]
    preds = [{"instance_id": bundle.task.task_id, "model_name_or_path": "m", "model_patch": bundle.oracle_patch}]
    out = tmp_path / "r.jsonl"
    proc = cli("run", "--predictions", str(write(tmp_path / "p.json", shape, preds)), "--agent-name", "renamed",
               "--tasks", str(demo.tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
               "--output", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = read_results(out)
    assert (r.agent, r.status, r.agent_run.model) == ("renamed", "resolved", "m") and r.model_patch


def test_predictions_naming_no_known_task_exit_non_zero_in_one_line(tmp_path):
    """Nothing would be graded: that is a mistake (a wrong --tasks, another dataset's file), not a pass."""
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": f"django__django-{i}", "model_name_or_path": "m",
                                         "model_patch": "diff"}) + "\n" for i in range(5)))
    tasks = Path(__file__).resolve().parent.parent / "tasks"
    proc = cli("run", "--predictions", str(preds), "--tasks", str(tasks), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "none of its 5 instance ids names a task in" in proc.stderr and "django__django-0" in proc.stderr
    assert not (tmp_path / "results").exists()
