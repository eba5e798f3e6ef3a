import json

import pytest

from sweserve.dataset.taskstore import load_bundle, save_bundle, select
from sweserve.errors import SweserveError
from sweserve.models import Task, TaskBundle, TestSpec

SHA = "a" * 40


def bundle(task_id="sgl-project__sglang-1"):
    task = Task(task_id=task_id, repo="sgl-project/sglang", profile="sglang", pr_number=1, title="t",
                base_commit=SHA, merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(files=["test/test_a.py"]))
    return TaskBundle(task=task, instruction="# t\n", oracle_patch="diff --git a/x b/x\n", tests_patch="diff --git a/t b/t\n")


def test_round_trip(tmp_path):
    b = bundle()
    d = save_bundle(tmp_path, b)
    assert sorted(p.name for p in d.iterdir()) == ["instruction.md", "oracle.patch", "task.json", "tests.patch"]
    assert load_bundle(d) == b


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(family="graphics"), "field 'family'"),
    (lambda d: d.pop("base_commit"), "field 'base_commit': Field required"),
    (lambda d: d.update(base_commit="xyz"), "field 'base_commit'"),
    (lambda d: d["resources"].update(gpus=-1), "field 'resources.gpus'"),
    (lambda d: d.update(surprise=1), "field 'surprise'"),
    (lambda d: d.update(task_id="sgl-project__sglang-2"), "does not match its folder"),
])
def test_broken_task_names_file_and_field(tmp_path, edit, message):
    d = save_bundle(tmp_path, bundle())
    data = json.loads((d / "task.json").read_text())
    edit(data)
    (d / "task.json").write_text(json.dumps(data))
    with pytest.raises(SweserveError) as exc:
        load_bundle(d)
    assert str(d / "task.json") in str(exc.value) and message in str(exc.value)


def test_bad_json_and_missing_files(tmp_path):
    d = save_bundle(tmp_path, bundle())
    (d / "task.json").write_text("{not json")
    with pytest.raises(SweserveError, match=r"task.json: not valid JSON"):
        load_bundle(d)
    d = save_bundle(tmp_path, bundle())
    (d / "oracle.patch").unlink()
    with pytest.raises(SweserveError, match=r"oracle.patch: missing task file"):
        load_bundle(d)
    save_bundle(tmp_path, bundle())
    (d / "tests.patch").write_text("")
    with pytest.raises(SweserveError, match=r"tests.patch: empty tests patch"):
        load_bundle(d)


def test_select_unknown_task(tmp_path):
    save_bundle(tmp_path, bundle())
    assert [b.task.task_id for b in select(tmp_path, [])] == ["sgl-project__sglang-1"]
    with pytest.raises(SweserveError, match="unknown task: nope"):
        select(tmp_path, ["nope"])
    with pytest.raises(SweserveError, match="no such tasks folder"):
        select(tmp_path / "missing", [])
