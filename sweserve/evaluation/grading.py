"""Hidden tests in a fresh sandbox: apply patches, run the task's tests with `docker exec`, grade outcomes."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from sweserve.dataset.patches import drop_paths, is_interpreter_hook, touched_paths
from sweserve.dataset.profiles import RepoProfile
from sweserve.environment.docker_sandbox import Sandbox
from sweserve.models import Outcome, Task, TaskBundle, TestResults

HARNESS_DIR = Path(__file__).resolve().parent.parent / "environment" / "in_sandbox"
PLUGIN = "sweserve_outcomes"
UNITTEST_RUNNER = "sweserve_unittest"
IN_BOX = "/sweserve"  # harness files and patches; put there only after the candidate phase
OUTCOMES = f"{IN_BOX}/outcomes.json"


class PatchError(Exception):
    """A patch did not apply; the message is git's output."""


class TestRunError(Exception):
    """The test runner produced no outcomes (crash, time-out, broken environment)."""

    __test__ = False


@dataclass
class TestRun:
    __test__ = False

    outcomes: dict[str, Outcome]
    skips: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    output: str = ""


def apply_patch(box: Sandbox, patch: str, name: str, timeout: float = 120) -> None:
    if not patch.strip():
        return
    path = f"{IN_BOX}/{name}.patch"
    box.put_file(path, patch.encode("utf-8"))
    res = box.exec(f"git apply --binary --whitespace=nowarn {shlex.quote(path)}", timeout)
    if res.exit_code != 0:
        raise PatchError(res.tail(1000).strip() or f"git apply exited {res.exit_code}")


def test_command(task: Task) -> str:
    files = " ".join(shlex.quote(f) for f in task.test.files)
    if task.test.runner == "unittest":
        return f"python {IN_BOX}/harness/{UNITTEST_RUNNER}.py {files}"
    return (
        f"python -m pytest -p {PLUGIN} -p no:cacheprovider -o addopts= -q -rN "
        f"--continue-on-collection-errors {files}"
    )


def run_tests(box: Sandbox, task: Task, timeout: float) -> TestRun:
    for name in (PLUGIN, UNITTEST_RUNNER):
        box.put_file(f"{IN_BOX}/harness/{name}.py", (HARNESS_DIR / f"{name}.py").read_bytes())
    box.exec(f"rm -f {OUTCOMES}", 30)
    env = dict(task.test.env)
    env["PYTHONPATH"] = ":".join(p for p in (f"{IN_BOX}/harness", env.get("PYTHONPATH", "")) if p)
    env["SWESERVE_OUTCOMES"] = OUTCOMES
    workdir = str(Path("/testbed") / task.test.workdir)
    res = box.exec(test_command(task), timeout, workdir=workdir, env=env)
    raw = box.read_file(OUTCOMES)
    if res.timed_out:
        raise TestRunError(f"hidden tests timed out after {int(timeout)}s")
    if raw is None:
        hint = f" (killed: over the {task.resources.memory_gb:g} GB memory limit?)" if res.exit_code == 137 else ""
        raise TestRunError(f"test runner exited {res.exit_code}{hint} without outcomes: {res.tail(400).strip()}")
    data = json.loads(raw)
    return TestRun(outcomes=data["outcomes"], skips=data.get("skips", {}), messages=data.get("messages", {}),
                   output=res.output)


def is_test_file_of(task: Task, profile: RepoProfile, tests_patch_paths: set[str]):
    return lambda p: (profile.is_test_path(p) or p in tests_patch_paths or p in task.test.files
                      or is_interpreter_hook(p))


def prepare_candidate_patch(bundle: TaskBundle, profile: RepoProfile, patch: str) -> tuple[str, list[str]]:
    """Drop the candidate's edits to test files and interpreter hooks: hidden tests are graded as the task
    defines them, by a runner the candidate cannot reach into."""
    drop = is_test_file_of(bundle.task, profile, touched_paths(bundle.tests_patch))
    return drop_paths(patch, drop)


def outcome_of(outcomes: dict[str, Outcome], test_id: str) -> Outcome:
    return outcomes.get(test_id, "missing")


def grade(task: Task, outcomes: dict[str, Outcome]) -> TestResults:
    return TestResults(
        fail_to_pass={t: outcome_of(outcomes, t) for t in task.FAIL_TO_PASS},
        pass_to_pass={t: outcome_of(outcomes, t) for t in task.PASS_TO_PASS},
    )
