"""tasks/ is the demo fixture mined, validated and linted: doing it again must reproduce it exactly."""

from pathlib import Path

from sweserve.dataset.lint import lint_task
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all, load_bundle, save_task
from sweserve.demo.fixture import PROFILE, build_demo_repo

DATASET = Path(__file__).resolve().parent.parent / "tasks"


def test_dataset_matches_the_fixture(tmp_path):
    repo = build_demo_repo(tmp_path / "repo")
    report = mine(open_repo(repo), load_profile(PROFILE), tmp_path / "tasks")
    assert report.rejected == {"no_tests": ["#107 Document how to run the tests"],
                               "tests_only": ["#108 Add a greedy tie-break test"]}
    fresh = {b.task.task_id: b for b in load_all(tmp_path / "tasks")}
    committed = {b.task.task_id: b for b in load_all(DATASET)}
    assert fresh.keys() == committed.keys() and len(fresh) == 6
    for task_id, b in committed.items():
        f = fresh[task_id]
        assert (b.oracle_patch, b.tests_patch) == (f.oracle_patch, f.tests_patch)
        recorded = {"FAIL_TO_PASS", "PASS_TO_PASS", "validation", "quality", "readiness"}
        assert b.task.model_dump(exclude=recorded) == f.task.model_dump(exclude=recorded)
        assert b.task.validated and len(b.task.FAIL_TO_PASS) == 1
        assert b.task.ready and not any(c.fired for c in b.task.validation.signals)
        # validation ends with lint --write: the same FAIL_TO_PASS give the same section and quality record
        f.task.FAIL_TO_PASS, f.task.PASS_TO_PASS = b.task.FAIL_TO_PASS, b.task.PASS_TO_PASS
        save_task(tmp_path / "tasks" / task_id, f.task)
        lint_task(tmp_path / "tasks" / task_id, repo, write=True)
        linted = load_bundle(tmp_path / "tasks" / task_id)
        assert linted.instruction == b.instruction
        assert linted.task.quality == b.task.quality and b.task.quality.passed
