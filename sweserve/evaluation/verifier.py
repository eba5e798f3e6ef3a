"""The verifier: one grade sandbox (no network, fresh from the task image) from submission to outcomes.

    harness in (and a digest of pytest's files and the image's installed module names, before anything else)
      → submission applied with `git apply --index` (git names every path it touched)
      → resets (`resets.py`): test paths, foreign conftests, pytest config, start-up hooks, package
        metadata and modules shadowing the stdlib, the runner or anything installed, back to base
      → tests.patch applied (and removed from the box) → the hidden files rewritten by the grading plan
        (`twins.py`: graded tests, their twins and canaries under fresh names, shuffled; the map stays here)
      → hidden tests run `runs` times (`grading.run_tests`: isolated interpreter, outcomes streamed behind a
        nonce), their outcomes read back through the plan

A submission is also scanned (`tamper_scan.py`); flags and resets travel in `Graded` (and in the errors
raised, so a runner that dies keeps them). Flags are a reviewer's aid: no grade depends on them; twins and
canaries that read wrong make a run `tampered`.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from sweserve.agents.base import IN_BOX
from sweserve.dataset.patches import apply_command
from sweserve.dataset.profiles import RepoProfile
from sweserve.environment.sandbox import WORKDIR, Sandbox, tar_of
from sweserve.evaluation import twins
from sweserve.evaluation.grading import (
    BOOT,
    HARNESS,
    HARNESS_SCRIPTS,
    SEVERITY,
    PatchError,
    TestRun,
    TestRunError,
    apply_patch,
    in_sandbox_script,
    run_tests,
)
from sweserve.evaluation.resets import Reset, package_dirs, plan_resets, pytest_section, repo_names
from sweserve.evaluation.submission import GIT, PRISTINE_GIT_ENV
from sweserve.evaluation.tamper_scan import scan
from sweserve.harness import sweserve_twins as canaries
from sweserve.harness.sweserve_protocol import numstat_paths
from sweserve.models import Outcome, TaskBundle

SEP = "\0@@sweserve@@\0"
# tests.patch names the real tests and holds their real values: gone before any candidate code runs (the hidden
# files themselves are rewritten by the grading plan)
FORGET_TESTS = f"rm -f {IN_BOX}/tests.patch {IN_BOX}/apply.err"
SEP_PRINTF = "\\0@@sweserve@@\\0"  # what printf turns into SEP


@dataclass
class Graded:
    """The hidden tests' runs on a submission, what was reset to base, what the scan flagged."""

    runs: list[TestRun]
    resets: list[Reset] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def tampered(self) -> list[str]:
        return sorted({t for run in self.runs for t in run.tampered})


def _git(box: Sandbox, command: str, timeout: float = 120):
    return box.exec(f"exec 2>{IN_BOX}/git.err; {command}", timeout, env=PRISTINE_GIT_ENV)


def _split_z(raw: str) -> list[str]:
    return [p for p in raw.split("\0") if p]


@dataclass
class FirstLook:
    """What the grade sandbox says before anything is reset."""

    manifest: str  # the digest of pytest's installed files and the harness, before the submission
    changed: dict[str, str]  # what the submission changed: {path: A/M/D/T}
    tests_paths: set[str]  # the paths tests.patch touches
    packages: set[str]  # the directories holding an `__init__.py` after the submission
    installed: frozenset[str]  # the image's top-level module names the base repository does not provide
    plugins: list[str] = field(default_factory=list)  # the image's pytest plugins (modules), trusted: loaded by -p


@dataclass
class Prepared:
    """What a fresh grade sandbox says before anything of a submission is in it (`prepare`)."""

    manifest: str
    image_names: set[str]  # every top-level module name the image's interpreter provides
    plugins: list[str]
    tests_paths: set[str]


def _unb64(line: str) -> str:
    try:
        return base64.b64decode(line.strip(), validate=True).decode("utf-8", "replace")
    except ValueError:
        raise PatchError("tests", "git could not list the submission's paths (unreadable listing)") from None


def _look_command(bundle: TaskBundle) -> str:
    """Two lines: the runner's digest, the image's module names and plugins (one interpreter, `--first-look`,
    exit 20 if it cannot start), then tests.patch's paths (base64 of `--numstat -z`)."""
    numstat = f"{GIT} apply --numstat -z {IN_BOX}/tests.patch" if bundle.tests_patch.strip() else "true"
    return (f"{{ set -o pipefail; python -I {HARNESS}/{BOOT}.py --first-look || exit 20; "
            f"{numstat} | base64 -w0 && echo; }}")


def _harness_files(bundle: TaskBundle) -> dict[str, bytes]:
    files = {f"{HARNESS[1:]}/{n}.py": in_sandbox_script(n) for n in HARNESS_SCRIPTS}
    files[f"{IN_BOX[1:]}/tests.patch"] = bundle.tests_patch.encode("utf-8")
    return files


def _prepared(lines: list[str]) -> Prepared:
    look, numstat = lines
    try:
        seen = json.loads(look)
        manifest = str(seen["manifest"])
        image_names = {n for n in seen["installed"] if isinstance(n, str)}
        image_plugins = [n for n in seen["plugins"] if isinstance(n, str)]
    except (ValueError, KeyError, TypeError):
        raise TestRunError("the test runner cannot list the task image's modules", output=look) from None
    return Prepared(manifest.strip(), image_names, image_plugins, numstat_paths(_unb64(numstat)))


def prepare(box: Sandbox, bundle: TaskBundle) -> None:
    """Harness and tests.patch into a grade sandbox, one copy (a trial's, while its candidate works, before
    anything of the candidate reaches that sandbox); `look_and_apply` runs the first look later."""
    box.copy_tree_in("/", tar_of(_harness_files(bundle)))


def apply_and_list(bundle: TaskBundle, patch_path: str) -> str:
    """The command applying the patch file at `patch_path` (if any, with `git apply --index`: git names every
    path it touched; exit 21 and git's error if it does not apply), then two lines: what it changed against
    base (`--name-status -z`) and every tracked path (`ls-files -z`), each as base64 (no path can forge a line)."""
    base = shlex.quote(bundle.task.base_commit)
    apply = (f"{{ [ ! -s {patch_path} ] || {apply_command(patch_path, index=True)} 2>{IN_BOX}/apply.err "
             f"|| {{ base64 -w0 {IN_BOX}/apply.err; echo; exit 21; }}; }}")
    return (f"{{ set -o pipefail; {apply} && {GIT} diff --cached --name-status -z --no-renames {base} | base64 -w0 "
            f"&& echo && {GIT} ls-files -z | base64 -w0 && echo; }}")


def look_and_apply(bundle: TaskBundle, patch_path: str) -> str:
    """The first look's command, in a grade sandbox holding the harness (`prepare`): the runner's digest, the
    image's module names and plugins and tests.patch's paths, taken before the patch at `patch_path` is applied,
    then `apply_and_list`. A trial runs it in the exec that diffs its candidate's tree (`submission.diff_then`)."""
    return f"{_look_command(bundle)} || exit 19; {apply_and_list(bundle, patch_path)}"


@dataclass
class Applied:
    """What `look_and_apply`'s command said in the grade sandbox: its exit status and output."""

    exit_code: int
    output: str


def _looked(applied: Applied, name: str) -> FirstLook:
    """The first look from what `look_and_apply`'s command said."""
    if applied.exit_code == 20:
        raise TestRunError("the test runner cannot start in the task image", output=applied.output)
    lines = applied.output.split("\n")
    if applied.exit_code == 21 and len(lines) >= 3:
        raise PatchError(name, _unb64(lines[2])[-1000:].strip() or "git apply failed")
    if applied.exit_code != 0 or len(lines) != 5:
        raise PatchError("tests", f"git could not list the submission's paths (exit {applied.exit_code})")
    prepared = _prepared(lines[:2])
    tokens = _split_z(_unb64(lines[2]))
    changed = {tokens[i + 1]: tokens[i][0] for i in range(0, len(tokens) - 1, 2)}
    tracked = set(_split_z(_unb64(lines[3])))
    packages = package_dirs(tracked)
    base_files = (tracked - {p for p, s in changed.items() if s == "A"}) | {p for p, s in changed.items() if s == "D"}
    return FirstLook(prepared.manifest, changed, prepared.tests_paths, packages,
                     frozenset(prepared.image_names - repo_names(base_files)), prepared.plugins)


def first_look(box: Sandbox, bundle: TaskBundle, patch: str, name: str, taken: Applied | None = None) -> FirstLook:
    """Harness in, runner digest, installed names and plugins taken (one interpreter, `--first-look`),
    submission applied with `git apply --index`: one copy, one exec; none when `taken` (a trial's: the command
    already ran in the exec that diffed the candidate's tree)."""
    if taken is None:
        files = _harness_files(bundle)
        patch_path = f"{IN_BOX}/{name}.patch"
        if patch.strip():
            files[patch_path[1:]] = patch.encode("utf-8")
        box.copy_tree_in("/", tar_of(files))
        res = _git(box, look_and_apply(bundle, patch_path))
        taken = Applied(res.exit_code, res.output)
    return _looked(taken, name)


def _pytest_config_changed(box: Sandbox, base: str):
    def changed(path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        now = box.read_file(f"{WORKDIR}/{path}")
        old = _git(box, f"{GIT} show {shlex.quote(f'{base}:{path}')}")
        before = old.output if old.exit_code == 0 else None
        after = now.decode("utf-8", "replace") if now is not None else None
        return pytest_section(name, before) != pytest_section(name, after)
    return changed


def reset_and_read(box: Sandbox, bundle: TaskBundle, profile: RepoProfile,
                   look: FirstLook) -> tuple[list[Reset], dict[str, str], dict[str, str]]:
    """The resets done, tests.patch applied, and the hidden test files' texts read back, after tests.patch and
    at base (where they existed): one exec (two copies in when something is reset)."""
    task = bundle.task
    hidden = look.tests_paths | set(task.test.files)
    resets = plan_resets(look.changed, lambda p: profile.is_test_path(p) or p in hidden, look.packages,
                         _pytest_config_changed(box, task.base_commit), look.installed)
    restore = [r.path for r in resets if r.existed]
    delete = [r.path for r in resets if not r.existed]
    steps = []
    if resets:
        lists = {"restore": restore, "delete": delete}
        box.copy_tree_in("/", tar_of({f"{IN_BOX[1:]}/{k}.lst": "\0".join(v).encode("utf-8", "surrogateescape")
                                   for k, v in lists.items()}))
    if restore:
        steps.append(f"{{ {GIT} checkout {shlex.quote(task.base_commit)} --pathspec-from-file={IN_BOX}/restore.lst "
                     f"--pathspec-file-nul || exit 22; }}")
    if delete:
        steps.append(f"{{ xargs -0 -r rm -f -- < {IN_BOX}/delete.lst || exit 22; }}")
    if bundle.tests_patch.strip():
        steps.append(f"{{ {apply_command(f'{IN_BOX}/tests.patch')} 2>{IN_BOX}/apply.err "
                     f"|| {{ cat {IN_BOX}/apply.err; exit 23; }}; }}")
    steps.append(FORGET_TESTS)
    steps += [f"printf '{SEP_PRINTF}'; cat -- {shlex.quote(f)} 2>/dev/null" for f in task.test.files]
    # each hidden file at base, from the image's object store (nothing the submission wrote: it is content-
    # addressed, and no candidate code has run in this box): what a forger reads beside the planted files
    steps += [f"printf '{SEP_PRINTF}'; {GIT} show {shlex.quote(f'{task.base_commit}:{f}')} 2>/dev/null"
              for f in task.test.files]
    res = _git(box, "; ".join(steps) + "; true")
    if res.exit_code == 22:
        raise PatchError("tests", "could not reset the submission's test files")
    if res.exit_code == 23:
        raise PatchError("tests", res.tail(1000).strip() or "git apply failed")
    texts = res.output.split(SEP)[1:]
    n = len(task.test.files)
    sources = {f: t for f, t in zip(task.test.files, texts[:n]) if f.endswith(".py") and t.strip()}
    based = {f: t for f, t in zip(task.test.files, texts[n:]) if f.endswith(".py") and t.strip()}
    return resets, sources, based


def read_selectors(box: Sandbox, bundle: TaskBundle) -> dict[str, str]:
    """The repository's conftest.py and pytest configuration files on the way to the hidden files, as this run
    honours them (after `reset_and_read`: base + tests.patch, whatever the submission wrote there reset) ->
    their texts: what `twins.grading_plan` keeps planted names clear of (`selectors`), as an export's plan is
    made from the same files in the task's clone (`export_plan.plan_sources`)."""
    task = bundle.task
    paths = canaries.selector_paths(task.test.files, task.test.workdir)
    res = _git(box, "; ".join(f"printf '{SEP_PRINTF}'; cat -- {shlex.quote(p)} 2>/dev/null" for p in paths) + "; true")
    texts = res.output.split(SEP)[1:]
    return {p: t for p, t in zip(paths, texts) if t.strip()}


def verify(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, patch: str, name: str, runs: int,
           seed: int | None = None, taken: Applied | None = None) -> Graded:
    """Grade `patch` in `box` (a fresh grade sandbox). Raises PatchError and TestRunError, which carry the
    scan's flags (`flags`): a patch that does not apply or a runner that dies keeps them for the reviewer.
    `seed`: the grading plan's (None: fresh; validation passes one so both states get the same twin candidates).
    `taken`: the first look's command already ran in `box` (`look_and_apply`), the patch applied."""
    flags = scan(patch)  # the patch's own text: known before anything runs
    try:
        return _verify(box, bundle, profile, patch, name, runs, flags, seed, taken)
    except (PatchError, TestRunError) as exc:
        exc.flags = sorted(set(flags))
        raise


def _verify(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, patch: str, name: str, runs: int,
            flags: list[str], seed: int | None, taken: Applied | None) -> Graded:
    task = bundle.task
    look = first_look(box, bundle, patch, name, taken)
    resets, sources, base = reset_and_read(box, bundle, profile, look)
    selectors = read_selectors(box, bundle)
    flags += [f"reset: {r.describe()}" for r in resets if r.suspicious]
    # reference submissions (validation) get candidate twins once the graded tests are known; a candidate's
    # grading, the recorded ones
    plan = twins.grading_plan(task, sources, seed, candidates=name != "candidate" and bool(task.FAIL_TO_PASS),
                              base=base, instruction=bundle.instruction, selectors=selectors)
    planted = {f"{WORKDIR[1:]}/{f}": text.encode("utf-8") for f, text in plan.texts.items()}
    results = []
    for _ in range(runs):
        plugins = list(dict.fromkeys([*profile.pytest_plugins, *look.plugins]))
        run = run_tests(box, task, task.resources.test_timeout_s, look.manifest, plugins, planted)
        planted = {}
        reading = plan.read(run.outcomes, run.skips, run.messages, run.exit_status)
        run.outcomes, run.skips, run.messages = reading.outcomes, reading.skips, reading.messages
        run.twins, run.shapes, run.margins = reading.twins, reading.shapes, reading.margins
        run.output = plan.unmask(run.output)
        run.tampered = sorted(set(run.tampered) | set(reading.problems))
        results.append(run)
    return Graded(results, resets, sorted(set(flags)))


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.M)
_PLAIN = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped", "XFAIL": "failed",
          "XPASS": "failed"}


def plain_outcomes(box: Sandbox, bundle: TaskBundle, patch: str, timeout: float) -> dict[str, Outcome]:
    """The hidden tests under plain pytest in the image (plugins autoloaded, the repository's own config), with
    `patch` and tests.patch applied: what a user of the image sees. For validation's comparison with the
    hardened runner only, never a grade (nothing here is protected from the code under test)."""
    task = bundle.task
    apply_patch(box, patch, "plain-oracle")
    apply_patch(box, bundle.tests_patch, "plain-tests")
    files = " ".join(shlex.quote(f) for f in task.test.files)
    workdir = str(PurePosixPath(WORKDIR) / task.test.workdir)
    res = box.exec(f"python -m pytest -q -rA {files}", timeout, workdir=workdir,
                   env=dict(task.test.env))
    if res.timed_out:
        return {}
    out: dict[str, Outcome] = {}
    for word, test_id in _SUMMARY.findall(res.output):
        outcome: Outcome = _PLAIN[word]  # type: ignore[assignment]
        if test_id not in out or SEVERITY[outcome] > SEVERITY[out[test_id]]:
            out[test_id] = outcome
    return out
