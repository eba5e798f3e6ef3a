"""Taking a candidate's submission: its working tree, diffed by nothing it controlled.

The candidate is root in its sandbox: a diff computed there (its `git`, its `.git/config`, its PATH) is
whatever it wants. So the tree under /testbed is copied out by the sandbox's backend (`.git` left out,
size bounded: `Sandbox.copy_tree_out`, the Docker API for Docker sandboxes), put into a fresh sandbox of the task image — no network, the
candidate never ran in it — and diffed there against base_commit with that image's own git and
repository: a temporary index over the copied tree, no system/global/candidate config, no hooks, no
fsmonitor, no external diff or textconv, no replace objects. Files the task image or the candidate's
`.gitignore` ignore are not part of a submission (as `git status` would show), binary files travel as
`--binary` literals, symlinks as links, modes as modes, deletions as deletions.
"""

from __future__ import annotations

import shlex

from sweserve.environment.sandbox import WORKDIR, Sandbox, TreeTooLarge
from sweserve.errors import InfraError, LimitExceeded
from sweserve.evaluation.context import Context
from sweserve.models import Task

MAX_TREE_BYTES = 2 << 30
SUBMITTED = "/sweserve/submitted"
PRISTINE_GIT_ENV = {
    "GIT_DIR": f"{WORKDIR}/.git",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "HOME": "/nonexistent",
}
GIT = ("git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false "
       "-c safe.directory='*' -c core.autocrlf=false -c core.safecrlf=false -c core.symlinks=true "
       "-c core.fileMode=true -c diff.noprefix=false -c diff.mnemonicPrefix=false --literal-pathspecs")


class SubmissionRejected(Exception):
    """The candidate's tree cannot be taken as a submission (e.g. too large)."""


def diff_command(base_commit: str) -> str:
    base = shlex.quote(base_commit)
    return (f"mkdir -p {SUBMITTED} && cd {SUBMITTED} && exec 2>/sweserve/diff.err && "
            f"{GIT} read-tree {base} && {GIT} add -A && "
            f"{GIT} diff --cached --binary --full-index --no-ext-diff --no-textconv --no-color --no-renames {base}")


def diff_tree(box: Sandbox, tree, base_commit: str) -> str:
    """The diff of `tree` (a tar of a working tree, paths under SUBMITTED) against base_commit, computed in a
    pristine `box`; git's errors go to a file, so the output is the patch alone."""
    box.copy_tree_in("/", tree)
    env = {**PRISTINE_GIT_ENV, "GIT_WORK_TREE": SUBMITTED, "GIT_INDEX_FILE": "/sweserve/submission.index"}
    res = box.exec(diff_command(base_commit), 300, env=env)
    if res.exit_code != 0:
        raise InfraError("sandbox", f"could not diff the candidate's tree (git exited {res.exit_code})")
    if res.truncated:  # more than the sandbox keeps of a command's output
        raise LimitExceeded(f"submission too large: {res.output_bytes / 2**20:.1f} MB")
    return res.output


def take_submission(ctx: Context, candidate: Sandbox, task: Task, image: str) -> str:
    """The candidate's working tree as a patch against base_commit, diffed in a fresh sandbox of `image`."""
    try:
        tree = candidate.copy_tree_out(WORKDIR, MAX_TREE_BYTES, prefix=SUBMITTED.lstrip("/") + "/")
    except TreeTooLarge as exc:
        raise SubmissionRejected(str(exc)) from None
    with tree, ctx.sandbox(image, task.task_id, "submission", task.resources, []) as clean:
        return diff_tree(clean, tree, task.base_commit)
