"""tasks/ is the demo fixture mined and validated: mining the fixture again must reproduce it exactly."""

from pathlib import Path

from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all
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
        assert (b.instruction, b.oracle_patch, b.tests_patch) == (f.instruction, f.oracle_patch, f.tests_patch)
        assert b.task.model_dump(exclude={"FAIL_TO_PASS", "PASS_TO_PASS", "validation"}) == \
            f.task.model_dump(exclude={"FAIL_TO_PASS", "PASS_TO_PASS", "validation"})
        assert b.task.validated and len(b.task.FAIL_TO_PASS) == 1
