"""The failures sweserve tells apart, so each ends where it belongs.

- `SweserveError` — bad input or an unmet precondition: one line on stderr, exit 2.
- `InfraError` — the machinery failed (Docker, an image build, git, the network, a cluster node), with its
  kind: a trial or a validation records it as `error` naming the kind (never as a verdict on the task); a
  command that cannot go on reports it in one line.
- `TaskRejected` — validation found the task unusable, with a category from `RejectionCategory`.
- `TrialSkipped` — the task cannot run on this host (e.g. it needs more GPUs than there are).
- anything else is a bug: the trial (or validation) saves its traceback and the command says where in one line.

`ErrorKind` is every kind a result's `error_kind` can hold: the infrastructure's, plus `agent` (the agent
failed), `task` (a precondition of the task, e.g. no clone to build its image from) and `internal` (a bug).
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

InfraKind = Literal["docker", "image_build", "git", "network", "sandbox", "limit", "node"]
ErrorKind = Literal[InfraKind, "agent", "task", "internal"]
# errors the candidate's own work causes: a limit its agent, its submission or its code broke (the sandbox's disk,
# the submission's size). Redone, one would be a free resample: an agent, or code the hidden tests import, that
# breaks a limit whenever it doubts its fix would be scored only on the attempts it trusts (red team 11, R11-4);
# left out of a fit, a failure it turns into one would vanish (red team 12a, R12a-2). Such an error is a failure.
OWN_ERRORS: frozenset[ErrorKind] = frozenset({"limit"})


class SweserveError(Exception):
    """Bad input or an unmet precondition, told to the user in one line."""


class InfraError(Exception):
    """Docker, an image build, git, the network, a sandbox's limit or a cluster node failed; `kind` says which."""

    def __init__(self, kind: InfraKind, message: str):
        super().__init__(message)
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.kind}: {super().__str__()}"


class LimitExceeded(InfraError):
    """A sandbox went past one of its limits (disk, a file read out of it, the submission's size)."""

    def __init__(self, message: str):
        super().__init__("limit", message)

    def __str__(self) -> str:
        return Exception.__str__(self)


class RejectionCategory(str, Enum):
    """Why validation rejected a task: the buckets summaries count. Infrastructure failing is never one of them
    (a validation that hit an `InfraError` ends as `error` and leaves the task's record as it was)."""

    NEEDS_ACCELERATOR = "needs_accelerator"
    NO_FAIL_TO_PASS = "no_fail_to_pass"
    TIMEOUT = "timeout"
    RUNNER_CRASHED = "runner_crashed"
    ORACLE_DOES_NOT_APPLY = "oracle_does_not_apply"
    TESTS_DO_NOT_APPLY = "tests_do_not_apply"
    ORACLE_REGRESSED = "oracle_regressed"
    RUNNER_MISMATCH = "runner_mismatch"  # tests pass under plain pytest in the image, fail only under sweserve's
    LINT = "lint"


class TaskRejected(Exception):
    """Validation's verdict that a task cannot be used, with its category."""

    def __init__(self, category: RejectionCategory, message: str):
        super().__init__(message)
        self.category = category


class TrialSkipped(Exception):
    """The task cannot run on this host; the message is the reason (e.g. `needs 2 GPUs (host has 0)`)."""


def describe_validation_error(source: str, exc) -> str:
    """One line naming the file and the first offending field of a pydantic ValidationError."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
    more = len(exc.errors()) - 1
    tail = f" (and {more} more)" if more > 0 else ""
    return f"{source}: field '{loc}': {err.get('msg', 'invalid')}{tail}"
