"""Running the hidden tests in the grade sandbox and reading their outcomes from the stream they send.

The runner scripts (`environment/in_sandbox/`) are copied in only now, after the candidate phase. Tests
run as `python -I sweserve_boot.py` (see that script): isolated start-up, repo paths after the standard
library and site-packages, pytest plugin autoload off, outcomes sent per test on stdout behind a
per-run nonce. Nothing here reads a file the code under test could have written, and no test output
goes into an exception's message: the output travels beside it (`TestRunError.output`) to the trial's
folder, never into a result a candidate sees.
"""

from __future__ import annotations

import json
import secrets
import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath

from sweserve.agents.base import IN_BOX
from sweserve.environment.sandbox import WORKDIR, Sandbox
from sweserve.environment.transfer import put_tree, tar_of
from sweserve.models import OUTCOMES as KNOWN_OUTCOMES
from sweserve.models import Outcome, Task, TestResults

PLUGIN = "sweserve_outcomes"
UNITTEST_RUNNER = "sweserve_unittest"
BOOT = "sweserve_boot"
HARNESS = f"{IN_BOX}/harness"
RUN_CONFIG = f"{HARNESS}/run.json"
NONCE_FILE = f"{HARNESS}/.nonce"
HARNESS_SCRIPTS = (BOOT, PLUGIN, UNITTEST_RUNNER)
SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


class PatchError(Exception):
    """A patch did not apply; `which` names it (candidate, oracle, tests), the message is git's output."""

    def __init__(self, which: str, message: str):
        super().__init__(message)
        self.which = which


class TestRunError(Exception):
    """The test runner produced no usable outcomes (crash, time-out, broken environment).

    `reason` is the raiser's fixed phrasing, the only part a result may show; `detail` (which may name hidden
    tests) joins it in the message for logs only, and `output` holds the runner's output for tests.log.
    """

    __test__ = False

    def __init__(self, reason: str, timed_out: bool = False, output: str = "", detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.timed_out = timed_out
        self.output = output


@dataclass
class TestRun:
    __test__ = False

    outcomes: dict[str, Outcome]
    skips: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    output: str = ""
    tampered: list[str] = field(default_factory=list)
    exit_status: int | None = None  # the runner's own verdict (pytest: 0 all passed, 1 some failed)
    twins: dict[str, Outcome] = field(default_factory=dict)  # twin (as JSON) -> outcome, mapped back by the plan
    shapes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # failures shaped for validation (twins.py)


def in_sandbox_script(name: str) -> bytes:
    return resources.files("sweserve.environment").joinpath("in_sandbox", f"{name}.py").read_bytes()


def apply_patch(box: Sandbox, patch: str, name: str, timeout: float = 120, index: bool = False) -> None:
    """git apply in /testbed; with index, the index records what it touched (new files included)."""
    if not patch.strip():
        return
    path = f"{IN_BOX}/{name}.patch"
    box.put_file(path, patch.encode("utf-8"))
    flags = "--index " if index else ""
    res = box.exec(f"git apply {flags}--binary --whitespace=nowarn {shlex.quote(path)}", timeout)
    if res.exit_code != 0:
        raise PatchError(name, res.tail(1000).strip() or f"git apply exited {res.exit_code}")


def install_harness(box: Sandbox) -> str:
    """Copy the runner scripts in; the digest of pytest's installed files and the harness, taken now."""
    put_tree(box, HARNESS, tar_of({f"{n}.py": in_sandbox_script(n) for n in HARNESS_SCRIPTS}))
    res = box.exec(f"python -I {HARNESS}/{BOOT}.py --manifest", 120)
    lines = res.output.strip().splitlines()
    if res.exit_code != 0 or not lines:
        raise TestRunError(f"the test runner cannot start in the task image (exit {res.exit_code})",
                           output=res.output)
    return lines[-1].strip()


def run_config(task: Task, plugins: list[str], nonce_file: str) -> dict:
    workdir = PurePosixPath(WORKDIR) / task.test.workdir
    paths = [str(workdir)] + [str(workdir / p) for p in task.test.env.get("PYTHONPATH", "").split(":") if p]
    args = ["-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rN", "--continue-on-collection-errors"]
    for plugin in plugins:
        args += ["-p", plugin]
    return {"runner": task.test.runner, "paths": paths, "files": list(task.test.files),
            "args": args + list(task.test.files), "nonce_file": nonce_file}


def parse_stream(output: str, nonce: str) -> tuple[list[dict], str]:
    """The runner's events (lines behind this run's nonce) and the output without them."""
    marker = f"@@sweserve:{nonce}:"
    events, kept = [], []
    for line in output.split("\n"):
        at = line.find(marker)
        if at < 0:
            kept.append(line)
            continue
        if line[:at].strip():
            kept.append(line[:at])
        try:
            event = json.loads(line[at + len(marker):])
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, "\n".join(kept)


def merge_events(events: list[dict]) -> tuple[dict[str, Outcome], dict[str, str], dict[str, str]]:
    """Outcomes per id, the worst report winning (a forged later "passed" never upgrades a failure)."""
    outcomes: dict[str, Outcome] = {}
    skips: dict[str, str] = {}
    messages: dict[str, str] = {}
    for event in events:
        test_id, outcome = event.get("id"), event.get("outcome")
        if not isinstance(test_id, str) or outcome not in SEVERITY or outcome not in KNOWN_OUTCOMES:
            continue
        if test_id not in outcomes or SEVERITY[outcome] >= SEVERITY[outcomes[test_id]]:
            outcomes[test_id] = outcome
        if isinstance(event.get("skip"), str):
            skips[test_id] = event["skip"]
        if isinstance(event.get("message"), str):
            messages[test_id] = event["message"]
    return outcomes, skips, messages


def run_tests(box: Sandbox, task: Task, timeout: float, manifest: str, plugins: list[str] = (),
              files: dict[str, bytes] | None = None) -> TestRun:
    """One run of the hidden tests (`files`, paths from /, copied in with its config); TestRunError when the
    runner never finished."""
    nonce = secrets.token_hex(16)
    config = run_config(task, list(plugins), NONCE_FILE)
    own = {RUN_CONFIG[1:]: json.dumps(config).encode(), NONCE_FILE[1:]: nonce.encode()}
    put_tree(box, "/", tar_of({**(files or {}), **own}, 0o644))
    workdir = str(PurePosixPath(WORKDIR) / task.test.workdir)
    env = {k: v for k, v in task.test.env.items() if not k.startswith("PYTHON")}
    res = box.exec(f"python -I {HARNESS}/{BOOT}.py {RUN_CONFIG}", timeout, workdir=workdir, env=env)
    events, output = parse_stream(res.output, nonce)
    if res.timed_out:
        raise TestRunError(f"hidden tests timed out after {int(timeout)}s", timed_out=True, output=output)
    if res.truncated:  # the stream's head (its `start`, maybe real failures) is gone: nothing left can be trusted
        outcomes, skips, messages = merge_events(events)
        return TestRun(outcomes, skips, messages, output, [f"the test output overflowed what the verifier keeps "
                                                          f"({res.output_bytes / 2**20:.0f} MB)"])
    starts = [e["start"] for e in events if "start" in e]
    if not starts or not any("end" in e for e in events):
        hint = f" (killed: over the {task.resources.memory_gb:g} GB memory limit?)" if res.exit_code == 137 else ""
        raise TestRunError(f"test runner exited {res.exit_code}{hint} before reporting all outcomes", output=output)
    outcomes, skips, messages = merge_events(events)
    ends = [e["end"] for e in events if isinstance(e.get("end"), int)]
    tampered = stream_problems(events, manifest, res.exit_code)
    return TestRun(outcomes, skips, messages, output, tampered, ends[-1] if ends else None)


def stream_problems(events: list[dict], manifest: str, exit_code: int) -> list[str]:
    """What is wrong with a complete stream's shape: one `start` (the digest taken before the submission)
    first, one `end` last, and the process's exit status the one `end` reported. Any of these broken means
    something in the test process wrote events of its own."""
    problems = []
    starts = [i for i, e in enumerate(events) if "start" in e]
    ends = [i for i, e in enumerate(events) if "end" in e]
    if starts[0] != 0 or len(starts) > 1:
        problems.append("the outcome stream has events before or a second start")
    elif events[0]["start"] != manifest:
        problems.append("pytest's installed files or the harness changed before the run")
    if len(ends) > 1 or ends[0] != len(events) - 1:
        problems.append("the outcome stream has events after its end")
    reported = events[ends[-1]].get("end")
    if exit_code < 128 and reported != exit_code:  # killed by a signal after its end: no forgery in that
        problems.append("the test runner's exit status is not the one its stream reported")
    return problems


def outcome_of(outcomes: dict[str, Outcome], test_id: str) -> Outcome:
    return outcomes.get(test_id, "missing")


def grade(task: Task, outcomes: dict[str, Outcome]) -> TestResults:
    return TestResults(
        fail_to_pass={t: outcome_of(outcomes, t) for t in task.FAIL_TO_PASS},
        pass_to_pass={t: outcome_of(outcomes, t) for t in task.PASS_TO_PASS},
    )
