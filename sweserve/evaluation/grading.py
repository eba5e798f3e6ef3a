"""Hidden tests in a fresh sandbox: apply patches, run the task's tests with `docker exec`, grade outcomes.

The in-sandbox runners (`environment/in_sandbox/`) are copied in only now, after the candidate phase.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath

from sweserve.agents.base import IN_BOX
from sweserve.dataset.patches import drop_paths, touched_paths
from sweserve.dataset.profiles import RepoProfile
from sweserve.environment.sandbox import WORKDIR, Sandbox
from sweserve.models import OUTCOMES as KNOWN_OUTCOMES
from sweserve.models import Outcome, Task, TaskBundle, TestResults

PLUGIN = "sweserve_outcomes"
UNITTEST_RUNNER = "sweserve_unittest"
OUTCOMES = f"{IN_BOX}/outcomes.json"


class PatchError(Exception):
    """A patch did not apply; `which` names it (candidate, oracle, tests), the message is git's output."""

    def __init__(self, which: str, message: str):
        super().__init__(message)
        self.which = which


class TestRunError(Exception):
    """The test runner produced no usable outcomes (crash, time-out, broken environment)."""

    __test__ = False

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


@dataclass
class TestRun:
    __test__ = False

    outcomes: dict[str, Outcome]
    skips: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    output: str = ""


def in_sandbox_script(name: str) -> bytes:
    return resources.files("sweserve.environment").joinpath("in_sandbox", f"{name}.py").read_bytes()


def apply_patch(box: Sandbox, patch: str, name: str, timeout: float = 120) -> None:
    if not patch.strip():
        return
    path = f"{IN_BOX}/{name}.patch"
    box.put_file(path, patch.encode("utf-8"))
    res = box.exec(f"git apply --binary --whitespace=nowarn {shlex.quote(path)}", timeout)
    if res.exit_code != 0:
        raise PatchError(name, res.tail(1000).strip() or f"git apply exited {res.exit_code}")


def test_command(task: Task) -> str:
    files = " ".join(shlex.quote(f) for f in task.test.files)
    if task.test.runner == "unittest":
        return f"python {IN_BOX}/harness/{UNITTEST_RUNNER}.py {files}"
    return (
        f"python -m pytest -p {PLUGIN} -p no:cacheprovider -o addopts= -q -rN "
        f"--continue-on-collection-errors {files}"
    )


def parse_outcomes(raw: bytes) -> dict:
    """The runner's outcomes file, checked: {"outcomes": {id: outcome}, "skips": {…}, "messages": {…}}."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise TestRunError("the outcomes file is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("outcomes"), dict):
        raise TestRunError("the outcomes file does not hold an outcomes mapping")
    outcomes = data["outcomes"]
    if not all(isinstance(k, str) and v in KNOWN_OUTCOMES for k, v in outcomes.items()):
        raise TestRunError("the outcomes file holds an unknown outcome")
    texts = {k: {str(i): str(m) for i, m in v.items()} if isinstance(v, dict) else {}
             for k, v in ((k, data.get(k)) for k in ("skips", "messages"))}
    return {"outcomes": outcomes, **texts}


def run_tests(box: Sandbox, task: Task, timeout: float) -> TestRun:
    for name in (PLUGIN, UNITTEST_RUNNER):
        box.put_file(f"{IN_BOX}/harness/{name}.py", in_sandbox_script(name))
    box.exec(f"rm -f {OUTCOMES}", 30)
    env = dict(task.test.env)
    env["PYTHONPATH"] = ":".join(p for p in (f"{IN_BOX}/harness", env.get("PYTHONPATH", "")) if p)
    env["SWESERVE_OUTCOMES"] = OUTCOMES
    workdir = str(PurePosixPath(WORKDIR) / task.test.workdir)
    res = box.exec(test_command(task), timeout, workdir=workdir, env=env)
    raw = box.read_file(OUTCOMES)
    if res.timed_out:
        raise TestRunError(f"hidden tests timed out after {int(timeout)}s", timed_out=True)
    if raw is None:
        hint = f" (killed: over the {task.resources.memory_gb:g} GB memory limit?)" if res.exit_code == 137 else ""
        raise TestRunError(f"test runner exited {res.exit_code}{hint} without outcomes: {res.tail(400).strip()}")
    return TestRun(**parse_outcomes(raw), output=res.output)


def is_test_file_of(task: Task, profile: RepoProfile, tests_patch_paths: set[str]):
    return lambda p: profile.is_test_path(p) or p in tests_patch_paths or p in task.test.files


def prepare_candidate_patch(bundle: TaskBundle, profile: RepoProfile, patch: str) -> tuple[str, list[str]]:
    """Drop the candidate's edits to test files: hidden tests are graded as the task defines them."""
    drop = is_test_file_of(bundle.task, profile, touched_paths(bundle.tests_patch))
    return drop_paths(patch, drop)


def outcome_of(outcomes: dict[str, Outcome], test_id: str) -> Outcome:
    return outcomes.get(test_id, "missing")


def grade(task: Task, outcomes: dict[str, Outcome]) -> TestResults:
    return TestResults(
        fail_to_pass={t: outcome_of(outcomes, t) for t in task.FAIL_TO_PASS},
        pass_to_pass={t: outcome_of(outcomes, t) for t in task.PASS_TO_PASS},
    )
