"""Taking a candidate's submission: its working tree, diffed by nothing it controlled, in the grade sandbox.

The candidate is root in its sandbox: a diff computed there (its `git`, its `.git/config`, its PATH) is
whatever it wants. So the tree under /testbed is copied out by the sandbox's backend (`.git` left out,
size bounded: `Sandbox.copy_tree_out`, the Docker API for Docker sandboxes) and put, as inert data, into the
trial's grade sandbox — fresh from the task image, no network, the candidate never ran in it, and nothing
has run in it yet but the tree's checkout — under SUBMITTED, away from /testbed and the harness. There it is
diffed against base_commit by the image's own git as root: a temporary index and a scratch object store
over the copied tree (the repository's objects only read, through an alternate), no system/global/candidate
config, no hooks, no fsmonitor, no external diff or textconv, no replace objects. Then the copy, the index
and the scratch objects are removed, and checked gone, before anything else happens in the sandbox: what
the verifier grades is the patch alone. Files the task image or the candidate's `.gitignore` ignore are not
part of a submission (as `git status` would show), binary files travel as `--binary` literals, symlinks as
links, modes as modes, deletions as deletions.

The tree is checked before it goes in (`inert_tree`): every entry under SUBMITTED, a directory, regular file,
symlink or hard link to a file already in it, and nothing under a symlink or a file (an archive whose entry
goes through a link it planted earlier writes wherever that link points).
"""

from __future__ import annotations

import base64
import shlex
import tarfile
from collections.abc import Callable
from typing import IO

from sweserve.environment.sandbox import WORKDIR, ExecResult, Sandbox, TreeTooLarge, streamed
from sweserve.errors import InfraError, LimitExceeded

MAX_TREE_BYTES = 2 << 30
SUBMITTED = "/sweserve/submitted"
SCRATCH = ("/sweserve/submission.index", "/sweserve/submission.objects", "/sweserve/diff.err")
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
DIFF_ENV = {**PRISTINE_GIT_ENV, "GIT_WORK_TREE": SUBMITTED, "GIT_INDEX_FILE": SCRATCH[0],
            "GIT_OBJECT_DIRECTORY": SCRATCH[1], "GIT_ALTERNATE_OBJECT_DIRECTORIES": f"{WORKDIR}/.git/objects"}
GONE = 24  # the diff's exit status when the copy could not be removed
REFUSED = 25  # git refused to add the tree (a path it never tracks, a symlinked .gitmodules): the tree's fault
NO_DIFF = 26  # `diff_then`'s exit status when git could not diff the copy


class SubmissionRejected(Exception):
    """The candidate's tree cannot be taken as a submission (e.g. too large)."""


def diff_command(base_commit: str) -> str:
    """The diff of the copy, then the copy and the scratch state removed (exit GONE if any is left; REFUSED,
    with git's first words on why, when `git add` refused the tree)."""
    base = shlex.quote(base_commit)
    scratch = " ".join([SUBMITTED, *SCRATCH])
    return (f"refused=; mkdir -p {SUBMITTED} {SCRATCH[1]} && cd {SUBMITTED} && "
            f"{{ {GIT} read-tree {base} && {{ {GIT} add -A || refused=1; }} && [ -z \"$refused\" ] && "
            f"{GIT} diff --cached --binary --full-index --no-ext-diff --no-textconv --no-color --no-renames {base}; "
            f"}} 2>{SCRATCH[2]}; code=$?; [ -n \"$refused\" ] && head -c 300 {SCRATCH[2]}; cd / && rm -rf -- {scratch}; "
            f"for p in {scratch}; do [ -e \"$p\" ] || [ -L \"$p\" ] && exit {GONE}; done; "
            f"[ -n \"$refused\" ] && exit {REFUSED}; exit $code")


def inert_tree(tree: IO[bytes], prefix: str = SUBMITTED.lstrip("/") + "/") -> None:
    """Refuse (SubmissionRejected) a tree that could write outside `prefix` when unpacked at "/": an entry
    outside it or through `..`, a device or fifo, a hard link to anything but a file already in it, an entry
    under a symlink, a file, or a folder it has not made. Leaves `tree` at 0."""
    tree.seek(0)
    dirs, files, links = {prefix.rstrip("/")}, set(), set()
    try:
        with tarfile.open(fileobj=tree, mode="r|") as tar:
            for m in streamed(tar):  # the names alone are kept, not every member's headers
                name = m.name.rstrip("/")
                parts = name.split("/")
                if not name.startswith(prefix) or {"..", ".", ""} & set(parts):
                    raise SubmissionRejected(f"tree entry {name!r} is outside the submission")
                parent = name.rsplit("/", 1)[0]
                if parent not in dirs:
                    raise SubmissionRejected(f"tree entry {name!r} is not under a folder of the tree "
                                             f"(under a link or a file?)")
                if name in dirs or name in files or name in links:
                    raise SubmissionRejected(f"tree entry {name!r} comes twice")
                if m.isdir():
                    dirs.add(name)
                elif m.isreg():
                    files.add(name)
                elif m.issym():
                    links.add(name)
                elif m.islnk() and m.linkname.rstrip("/") in files:
                    files.add(name)
                else:
                    raise SubmissionRejected(f"tree entry {name!r} is not a file, folder or link of the tree")
    except tarfile.TarError as exc:
        raise SubmissionRejected(f"the tree is not a readable archive: {exc}") from None
    finally:
        tree.seek(0)


DIFF_TIMEOUT_S = 300  # git's diff of the candidate's tree in the fresh grade sandbox


def _in_time(res: ExecResult) -> None:
    """A diff past its limit is the tree's doing: nothing but the tree is in the fresh grade sandbox, and a tree
    can be made slow for git at will (a .gitignore of 200,000 patterns beside thousands of long names: 20
    minutes of `git add -A`). As an error it was redone by `--retry-errors` (red team 14a, R14a-4)."""
    if res.timed_out:
        raise SubmissionRejected(f"git could not diff the tree within {DIFF_TIMEOUT_S} s")


def diff_tree(box: Sandbox, tree: IO[bytes], base_commit: str) -> str:
    """The diff of `tree` (a tar of a working tree, paths under SUBMITTED) against base_commit, computed in
    `box` (fresh, nothing of the candidate in it yet); git's errors go to a file, so the output is the patch
    alone. The copy is gone from `box` when this returns."""
    inert_tree(tree)
    box.copy_tree_in("/", tree)
    res = box.exec(diff_command(base_commit), DIFF_TIMEOUT_S, env=DIFF_ENV)
    if res.exit_code == GONE:
        raise InfraError("sandbox", "could not remove the candidate's tree from the grade sandbox")
    _in_time(res)
    if res.exit_code == REFUSED:  # the image's git, on the tree alone: the candidate's, not the machinery's
        why = " ".join(res.output.split())
        raise SubmissionRejected(f"git refused the tree: {why}" if why else "git refused the tree")
    if res.exit_code != 0:
        raise InfraError("sandbox", f"could not diff the candidate's tree (git exited {res.exit_code})")
    if res.truncated:  # more than the sandbox keeps of a command's output
        raise LimitExceeded(f"submission too large: {res.output_bytes / 2**20:.1f} MB")
    return res.output


def copy_tree(candidate: Sandbox) -> IO[bytes]:
    """The candidate's working tree as a tar under SUBMITTED, copied by the backend; SubmissionRejected past
    MAX_TREE_BYTES."""
    try:
        return candidate.copy_tree_out(WORKDIR, MAX_TREE_BYTES, prefix=SUBMITTED.lstrip("/") + "/")
    except TreeTooLarge as exc:
        raise SubmissionRejected(str(exc)) from None


def take_submission(grade_box: Sandbox, tree: IO[bytes], base_commit: str) -> str:
    """The candidate's tree (`copy_tree`) as a patch against base_commit, diffed in the trial's fresh grade
    sandbox and removed from it. The caller closes `tree`."""
    return diff_tree(grade_box, tree, base_commit)


def diff_then(box: Sandbox, tree: IO[bytes], base_commit: str, patch_path: str, then: str | Callable[[], str],
              ready: Callable[[], object] = lambda: None) -> tuple[str, int, str]:
    """`diff_tree`, and in the same exec, once the copy is gone, the command `then` (with the patch at
    `patch_path`, git's environment without the scratch index and objects, its stdout kept apart): the patch,
    `then`'s exit status and its output. Saves the verifier an exec (`verifier.apply_and_list`). `ready` is
    waited for between the tree's copy (inert data under SUBMITTED) and the exec: a trial's first look, which
    must precede the apply, runs meanwhile; `then` may be a function, asked for the command after `ready`."""
    inert_tree(tree)
    box.copy_tree_in("/", tree)
    ready()
    then = then() if callable(then) else then
    scratch = " ".join(f"{k}" for k in DIFF_ENV if k not in PRISTINE_GIT_ENV)
    out = shlex.quote(f"{patch_path}.then")
    res = box.exec(f"( {diff_command(base_commit)} ) > {shlex.quote(patch_path)}; code=$?; "
                   f"[ $code -eq {REFUSED} ] && {{ cat {shlex.quote(patch_path)}; exit {REFUSED}; }}; "
                   f"[ $code -eq 0 ] || {{ [ $code -eq {GONE} ] && exit {GONE}; exit {NO_DIFF}; }}; "
                   f"( unset {scratch}; {then} ) > {out} 2>/dev/null; code=$?; "
                   f"base64 -w0 {out} && echo && rm -f {out} && cat {shlex.quote(patch_path)} || exit {NO_DIFF}; "
                   f"exit $code", DIFF_TIMEOUT_S, env=DIFF_ENV)
    if res.exit_code == GONE:
        raise InfraError("sandbox", "could not remove the candidate's tree from the grade sandbox")
    _in_time(res)
    if res.exit_code == REFUSED:  # as in diff_tree: git's words on why are the output
        why = " ".join(res.output.split())
        raise SubmissionRejected(f"git refused the tree: {why}" if why else "git refused the tree")
    if res.exit_code == NO_DIFF:
        raise InfraError("sandbox", "could not diff the candidate's tree")
    if res.truncated:  # more than the sandbox keeps of a command's output
        raise LimitExceeded(f"submission too large: {res.output_bytes / 2**20:.1f} MB")
    head, _, patch = res.output.partition("\n")
    try:
        said = base64.b64decode(head, validate=True).decode("utf-8", "replace")
    except ValueError:
        raise InfraError("sandbox", "could not read the diff's output") from None
    return patch, res.exit_code, said
