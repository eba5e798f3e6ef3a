"""Running the hidden tests in the grade sandbox and reading their outcomes from the stream they send.

The runner scripts (`harness/`) go into the grade sandbox with its first look, while the candidate works
(`verifier.prepare`: it has no way to that sandbox; its tree may arrive meanwhile, inert data under
/sweserve/submitted). Tests
run as `python -I sweserve_boot.py` (see that script): isolated start-up, repo paths after the standard
library and site-packages, pytest plugin autoload off, outcomes sent per test on stdout behind a
per-run nonce. Nothing here reads a file the code under test could have written, and no test output
goes into an exception's message: the output travels beside it (`TestRunError.output`) to the trial's
folder, never into a result a candidate sees.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import secrets
import shlex
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath

from sweserve.agents.base import IN_BOX, PatchError, apply_patch  # noqa: F401  (the two re-exported: their old home)
from sweserve.environment.sandbox import WORKDIR, Sandbox
from sweserve.errors import InfraError, LimitExceeded
from sweserve.evaluation.submission import PRISTINE_GIT_ENV
from sweserve.harness.sweserve_protocol import (  # shared with the exports' in-box verifier
    SEVERITY,
    boot_config,
    event_of,
    merge_events,
    parse_stream,
    stream_problems,
)
from sweserve.harness.sweserve_protocol import read_stream as _read_stream
from sweserve.models import Outcome, Task, TestResults

PLUGIN = "sweserve_outcomes"
UNITTEST_RUNNER = "sweserve_unittest"
BOOT = "sweserve_boot"
HARNESS = f"{IN_BOX}/harness"
RUN_CONFIG = f"{HARNESS}/run.json"
NONCE_FILE = f"{HARNESS}/.nonce"
DROP = "sweserve_drop"
PLANT = f"{IN_BOX}/plant"  # the planted files, staged root's alone until the run's command moves them into place
INLINE_BYTES = 96 * 1024  # files sent inside a command (`unpack_command`): up to this, gzipped and in base64
RESET_FAILED, TESTS_PATCH_FAILED, PLANT_LEFT = 22, 23, 24  # a run's steps before its runner that failed
HARNESS_SCRIPTS = (BOOT, PLUGIN, UNITTEST_RUNNER, DROP)
__all__ = ["SEVERITY", "event_of", "merge_events", "parse_stream", "stream_problems"]


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
        self.flags: list[str] = []  # the tamper scan's, set by the verifier: a runner that dies keeps them


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
    margins: dict[str, Outcome] = field(default_factory=dict)  # validation's margins (twins.margins) -> outcome


def in_sandbox_script(name: str) -> bytes:
    return resources.files("sweserve.harness").joinpath(f"{name}.py").read_bytes()


def run_config(task: Task, plugins: list[str], nonce_file: str, user: str | None) -> dict:
    return boot_config(task.test.runner, list(task.test.files), str(PurePosixPath(WORKDIR) / task.test.workdir),
                       task.test.env.get("PYTHONPATH", ""), list(plugins), nonce_file, **least_privilege(user))


def least_privilege(user: str | None, workdir: str = WORKDIR, private: str = IN_BOX) -> dict:
    """The boot script's privilege drop (`sweserve_drop.py`): tests run as `user`, the repository is root's and
    read-only to them, the harness's inputs (tests.patch, run config) are root's alone. No user: no drop (the
    sandbox's backend cannot give one, see `Sandbox.test_user`)."""
    if user is None:
        return {}
    return {"user": user, "lock": [workdir], "private": [private]}  # the exports' verifier passes the same


@dataclass
class Stream:
    """What one run sent behind its nonce: the events that fit the schema (sweserve_protocol.event_of), how many
    did not, and the runner's output without the stream's lines."""

    events: list[dict]
    malformed: int
    output: str


def read_stream(output: str, nonce: str) -> Stream:
    return Stream(*_read_stream(output, nonce))


@dataclass
class Staged:
    """A run staged in the grade sandbox (`stage_run`): its nonce, and the planted files (paths under the
    repository) waiting root's alone under PLANT until the run's command moves them into place."""

    nonce: str
    planted: list[str] = field(default_factory=list)


def _staging_tar(files: dict[str, bytes]) -> bytes:
    """The run's config and nonce at their places, the planted files under PLANT (a folder root's alone)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if any(path.startswith(PLANT[1:] + "/") for path in files):
            info = tarfile.TarInfo(PLANT[1:])
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o700, int(time.time())
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def staging(task: Task, test_user: str | None, plugins: Sequence[str] = (),
            files: dict[str, bytes] | None = None) -> tuple[Staged, bytes]:
    """A run's config and fresh nonce, and the planted files (`files`, paths under the repository) under PLANT,
    as one tar to unpack at / in the grade sandbox (`stage_run`, or inside a command before the tests run:
    `unpack_command`)."""
    nonce = secrets.token_hex(16)
    config = run_config(task, list(plugins), NONCE_FILE, test_user)
    planted = dict(sorted((files or {}).items()))
    own = {RUN_CONFIG[1:]: json.dumps(config).encode(), NONCE_FILE[1:]: nonce.encode()}
    return Staged(nonce, list(planted)), _staging_tar({**{f"{PLANT[1:]}/{f}": d for f, d in planted.items()}, **own})


def stage_run(box: Sandbox, task: Task, plugins: Sequence[str] = (), files: dict[str, bytes] | None = None) -> Staged:
    """One copy into the grade sandbox (`staging`): a run's config and fresh nonce, and the planted files under
    PLANT, root's alone, where nothing the submission's apply writes reaches them; `run_tests` moves them into
    the repository after the resets and tests.patch, before the runner starts."""
    staged, tar = staging(task, box.test_user, plugins, files)
    box.copy_tree_in("/", tar)
    return staged


def unpack_command(tar: bytes, fails: int) -> str | None:
    """A shell step unpacking `tar` at / (gzipped, base64, in the command itself; exit `fails` if it cannot), or
    None past INLINE_BYTES. The tar is in the command line of the exec's processes while they run: only for an
    exec that ends before any code of the submission runs in the sandbox."""
    packed = base64.b64encode(gzip.compress(tar, 6, mtime=0)).decode()
    if len(packed) > INLINE_BYTES:
        return None
    return (f"{{ {{ command -v tar && command -v gzip; }} >/dev/null && "
            f"printf %s {packed} | base64 -d | tar -xzf - -C /; }} || exit {fails}")


def place_planted(planted: Sequence[str]) -> str:
    """The shell step moving the staged planted files into the repository and removing PLANT (exit PLANT_LEFT
    if any is left): the last step before the runner starts."""
    moves = [f"mv -f -- {shlex.quote(f'{PLANT}/{f}')} {shlex.quote(f'{WORKDIR}/{f}')}" for f in planted]
    return (f"{{ {' && '.join([*moves, f'rm -rf -- {PLANT}'])} && [ ! -e {PLANT} ] && [ ! -L {PLANT} ]; }} "
            f"|| exit {PLANT_LEFT}")


def run_tests(box: Sandbox, task: Task, timeout: float, manifest: str, plugins: Sequence[str] = (),
              files: dict[str, bytes] | None = None, before: str = "", staged: Staged | None = None) -> TestRun:
    """One run of the hidden tests; TestRunError when the runner never finished. `files` (paths under the
    repository) are planted with its config (`stage_run`), unless `staged` says that was done already.

    One exec: `before` (the verifier's resets and tests.patch, as root in the repository with the pristine git
    environment; exit RESET_FAILED or TESTS_PATCH_FAILED), the planted files moved into place and their
    staging folder removed, then the runner. A step that fails is told apart from the runner by its status and
    the stream's missing `start` (the runner sends it before any repository code is imported)."""
    staged = staged or stage_run(box, task, plugins, files)
    workdir = str(PurePosixPath(WORKDIR) / task.test.workdir)
    env = {k: v for k, v in task.test.env.items() if not k.startswith("PYTHON")}
    steps = []
    if before:
        pristine = " ".join(f"{k}={shlex.quote(v)}" for k, v in PRISTINE_GIT_ENV.items())
        steps.append(f"( exec 2>{IN_BOX}/git.err; export {pristine}; cd {WORKDIR} && {before} ) || exit $?")
    if staged.planted:
        steps.append(place_planted(staged.planted))
    steps.append(f"exec python -I {HARNESS}/{BOOT}.py {RUN_CONFIG}")
    try:
        res = box.exec("; ".join(steps), timeout, workdir=workdir, env=env)
    except LimitExceeded as exc:
        # the box broke its disk limit while the hidden tests ran (or before, with the submission in it): what
        # ran there wrote it, the submission's code or the tests validation ran under the same limits, never the
        # machinery. A verdict, as a time-out is: an `error` would be retried with a fresh grading plan, so a
        # forger could fill the disk on the draws it cannot read and forge the rest (red team 11, R11-4)
        raise TestRunError(f"the hidden tests' run was stopped at the sandbox's limit ({exc})") from None
    stream = read_stream(res.output, staged.nonce)
    events, output = stream.events, stream.output
    if res.timed_out:
        raise TestRunError(f"hidden tests timed out after {int(timeout)}s", timed_out=True, output=output)
    if res.truncated:  # the stream's head (its `start`, maybe real failures) is gone: nothing left can be trusted
        outcomes, skips, messages = merge_events(events)
        return TestRun(outcomes, skips, messages, output, [f"the test output overflowed what the verifier keeps "
                                                          f"({res.output_bytes / 2**20:.0f} MB)"])
    starts = [e["start"] for e in events if "start" in e]
    if not starts:  # nothing of the runner ran: a step before it failed, or it could not start
        if res.exit_code == RESET_FAILED and before:
            raise PatchError("tests", "could not reset the submission's test files")
        if res.exit_code == TESTS_PATCH_FAILED and before:
            raise PatchError("tests", res.tail(1000).strip() or "git apply failed")
        if res.exit_code == PLANT_LEFT and staged.planted:
            raise InfraError("sandbox", "could not move the planted test files into place")
    if not starts or not any("end" in e for e in events):
        hint = f" (killed: over the {task.resources.memory_gb:g} GB memory limit?)" if res.exit_code == 137 else ""
        raise TestRunError(f"test runner exited {res.exit_code}{hint} before reporting all outcomes", output=output)
    outcomes, skips, messages = merge_events(events)
    ends = [e["end"] for e in events if isinstance(e.get("end"), int)]
    tampered = stream_problems(events, manifest, res.exit_code, stream.malformed)
    return TestRun(outcomes, skips, messages, output, tampered, ends[-1] if ends else None)


def outcome_of(outcomes: dict[str, Outcome], test_id: str) -> Outcome:
    return outcomes.get(test_id, "missing")


def grade(task: Task, outcomes: dict[str, Outcome]) -> TestResults:
    return TestResults(
        fail_to_pass={t: outcome_of(outcomes, t) for t in task.FAIL_TO_PASS},
        pass_to_pass={t: outcome_of(outcomes, t) for t in task.PASS_TO_PASS},
    )
