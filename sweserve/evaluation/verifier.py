"""The verifier: one grade sandbox (no network, fresh from the task image) from submission to outcomes.

    harness in (and a digest of pytest's files, the image's installed module names, and the hidden files
      after tests.patch and at base, read from the image's repository: before anything else)
      → the grading plan made from those files on the host (`twins.py`: graded tests, their twins and
        canaries under fresh names, shuffled; the map stays here), its planted files staged root's alone
      → submission applied with `git apply --index` (git names every path it touched)
      → in the first run's exec: resets (`resets.py`): test paths, foreign conftests, pytest config, start-up
        hooks, package metadata and modules shadowing the stdlib, the runner or anything installed, back to
        base → tests.patch applied (and removed from the box) → the planted files moved over the hidden
        files, their staging folder removed → hidden tests run `runs` times (`grading.run_tests`: isolated
        interpreter, outcomes streamed behind a nonce), their outcomes read back through the plan

A submission is also scanned (`tamper_scan.py`); flags and resets travel in `Graded` (and in the errors
raised, so a runner that dies keeps them). Flags are a reviewer's aid: no grade depends on them; twins and
canaries that read wrong make a run `tampered`.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import PurePosixPath

from sweserve.agents.base import IN_BOX
from sweserve.dataset.patches import apply_command
from sweserve.dataset.profiles import RepoProfile
from sweserve.environment.sandbox import WORKDIR, Sandbox, tar_of, unpacks_at_root
from sweserve.evaluation import twins
from sweserve.evaluation.grading import (
    BOOT,
    HARNESS,
    HARNESS_SCRIPTS,
    RESET_FAILED,
    SEVERITY,
    TESTS_PATCH_FAILED,
    PatchError,
    Staged,
    TestRun,
    TestRunError,
    apply_patch,
    in_sandbox_script,
    run_tests,
    staging,
    unpack_command,
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
HIDDEN_SCRATCH = (f"{IN_BOX}/hidden.index", f"{IN_BOX}/hidden.objects")  # `_hidden_command`'s, removed by it
LOOK_LINES = 4  # the first look's lines (`_look_command`)
NO_UNPACK = 18  # files sent inside a command could not be unpacked (no tar or gzip in the image)
INLINE_LISTS = 64 * 1024  # reset lists up to this size travel in the run's command, larger ones by a copy


@dataclass
class Graded:
    """The hidden tests' runs on a submission, what was reset to base, what the scan flagged."""

    runs: list[TestRun]
    resets: list[Reset] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def tampered(self) -> list[str]:
        return sorted({t for run in self.runs for t in run.tampered})


def _git(box: Sandbox, command: str, timeout: float = 120, made: bool = False):
    """`command` with git's pristine environment, its stderr to a file (`made`: IN_BOX made first)."""
    mkdir = f"mkdir -p {IN_BOX} && " if made else ""
    return box.exec(f"{mkdir}exec 2>{IN_BOX}/git.err; {command}", timeout, env=PRISTINE_GIT_ENV)


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
    sources: dict[str, str] = field(default_factory=dict)  # each hidden .py file after tests.patch (`Prepared`)
    based: dict[str, str] = field(default_factory=dict)  # each hidden .py file at base, where it existed
    selectors: dict[str, str] = field(default_factory=dict)  # conftests and pytest configs (`Prepared`)


@dataclass
class Prepared:
    """What a fresh grade sandbox says before anything of a submission is in it (`prepare`)."""

    manifest: str
    image_names: set[str]  # every top-level module name the image's interpreter provides
    plugins: list[str]
    tests_paths: set[str]
    sources: dict[str, str] = field(default_factory=dict)  # each hidden .py file after tests.patch
    based: dict[str, str] = field(default_factory=dict)  # each hidden .py file at base, where it existed
    selectors: dict[str, str] = field(default_factory=dict)  # `_read_after`'s selector files after tests.patch


def _unb64(line: str) -> str:
    try:
        return base64.b64decode(line.strip(), validate=True).decode("utf-8", "replace")
    except ValueError:
        raise PatchError("tests", "git could not list the submission's paths (unreadable listing)") from None


def _look_command(bundle: TaskBundle) -> str:
    """Four lines: the runner's digest, the image's module names and plugins (one interpreter, `--first-look`,
    exit 20 if it cannot start), tests.patch's paths (base64 of `--numstat -z`), then the hidden files
    (`_hidden_command`)."""
    numstat = f"{GIT} apply --numstat -z {IN_BOX}/tests.patch" if bundle.tests_patch.strip() else "true"
    return (f"{{ set -o pipefail; python -I {HARNESS}/{BOOT}.py --first-look || exit 20; "
            f"{numstat} | base64 -w0 && echo; {_hidden_command(bundle)}; }}")


def _hidden_command(bundle: TaskBundle) -> str:
    """Two lines: each hidden test file after tests.patch, with the selector files (`_read_after`), then each
    hidden file at base (base64 of the texts, each behind
    SEP; nothing for a file that is not there), read from the image's repository, never the working tree: the
    grading plan's input, which no submission can touch (the resets put every hidden path back to base before
    tests.patch is applied). tests.patch goes to a scratch index whose objects go to a scratch store, both
    removed (exit 19 if not): the real tests' text never lands in the repository's objects, which the tests can
    read; a tests.patch that does not apply there is exit 19 too."""
    task = bundle.task
    at_base = "".join(f"printf '{SEP_PRINTF}'; {GIT} show {shlex.quote(f'{task.base_commit}:{f}')}; "
                      for f in task.test.files)
    return f"{_scratch_show(bundle, _read_after(bundle))}; {{ {at_base}true; }} 2>/dev/null | base64 -w0 && echo"


def _scratch_show(bundle: TaskBundle, paths: list[str]) -> str:
    """One line: the texts of `paths` at base + tests.patch (base64, each behind SEP; nothing for one that is not
    there), read through a scratch index and object store, both removed (exit 19 if not, or if tests.patch does
    not apply there)."""
    index, objects = HIDDEN_SCRATCH
    apply = (f" && {apply_command(f'{IN_BOX}/tests.patch', cached=True, git=GIT)}"
             if bundle.tests_patch.strip() else "")
    show = "".join(f"printf '{SEP_PRINTF}'; {GIT} show {shlex.quote(':' + f)}; " for f in paths)
    scratch = (f"GIT_INDEX_FILE={index} GIT_OBJECT_DIRECTORY={objects} "
               f"GIT_ALTERNATE_OBJECT_DIRECTORIES={WORKDIR}/.git/objects")
    return (f"( export {scratch}; mkdir -p {objects} && {GIT} read-tree {shlex.quote(bundle.task.base_commit)}"
            f"{apply} && {{ {show}true; }} 2>/dev/null ) | base64 -w0; code=$?; echo; rm -rf -- {index} {objects}; "
            f"[ $code -eq 0 ] && [ ! -e {index} ] && [ ! -e {objects} ] || exit 19")


def _read_after(bundle: TaskBundle) -> list[str]:
    """The files the first look reads after tests.patch: the hidden files, then the selector files on the way
    to them (each conftest.py and pytest configuration file, `canaries.selector_paths`) that are not hidden
    files: what the plan keeps planted names clear of, read where no submission reaches."""
    files = list(bundle.task.test.files)
    return files + [p for p in canaries.selector_paths(files, bundle.task.test.workdir) if p not in files]


def _harness_files(bundle: TaskBundle) -> dict[str, bytes]:
    files = {f"{HARNESS[1:]}/{n}.py": in_sandbox_script(n) for n in HARNESS_SCRIPTS}
    files[f"{IN_BOX[1:]}/tests.patch"] = bundle.tests_patch.encode("utf-8")
    return files


def _texts(line: str, files: list[str]) -> dict[str, str]:
    """The hidden .py files' texts from one of `_hidden_command`'s lines (an empty one: not there)."""
    texts = _unb64(line).split(SEP)[1:]
    return {f: t for f, t in zip(files, texts) if f.endswith(".py") and t.strip()}


def with_plugin_modules(box: Sandbox, bundle: TaskBundle, selectors: dict[str, str]) -> dict[str, str]:
    """The selector files and the plugin modules they load (`canaries.with_plugins`: a conftest's
    `pytest_plugins` and imports, a configuration's or PYTEST_ADDOPTS' `-p`), read in `box` from base + tests.patch as the first look reads:
    an exec a round, none for a task whose selector files load no plugin module. Unreadable: none added."""
    def read_many(paths: list[str]) -> dict[str, str]:
        res = _git(box, _scratch_show(bundle, paths), made=True)
        if res.exit_code != 0:
            return {}
        try:
            return dict(zip(paths, _unb64(res.output.split("\n")[0]).split(SEP)[1:]))
        except PatchError:
            return {}
    return canaries.with_plugins(selectors, list(bundle.task.test.files), bundle.task.test.workdir, read_many,
                                 bundle.task.test.env.get("PYTEST_ADDOPTS", ""))


def _prepared(lines: list[str], bundle: TaskBundle) -> Prepared:
    files = list(bundle.task.test.files)
    look, numstat, after, at_base = lines
    read = _read_after(bundle)
    texts = dict(zip(read, _unb64(after).split(SEP)[1:]))
    selectors = {p: texts[p] for p in canaries.selector_paths(files, bundle.task.test.workdir)
                 if texts.get(p, "").strip()}
    try:
        seen = json.loads(look)
        manifest = str(seen["manifest"])
        image_names = {n for n in seen["installed"] if isinstance(n, str)}
        image_plugins = [n for n in seen["plugins"] if isinstance(n, str)]
    except (ValueError, KeyError, TypeError):
        raise TestRunError("the test runner cannot list the task image's modules", output=look) from None
    return Prepared(manifest.strip(), image_names, image_plugins, numstat_paths(_unb64(numstat)),
                    {f: t for f, t in texts.items() if f in files and f.endswith(".py") and t.strip()},
                    _texts(at_base, files), selectors)


def prepare(box: Sandbox, bundle: TaskBundle) -> "Applied":
    """Harness and tests.patch into a grade sandbox, and its first look taken there (the runner's digest, the
    image's module names and plugins, tests.patch's paths, the hidden files): a trial's, while its candidate
    works, before anything of the candidate reaches that sandbox. One exec: the files travel in its command
    (a gzipped tar, base64) up to INLINE_HARNESS bytes, else by a copy before it, or when the image has no tar
    or gzip. Its exit status and output, for `joined` with what `apply_and_list` says once the patch is in."""
    unpack = unpack_command(tar_of(_harness_files(bundle)), NO_UNPACK) if unpacks_at_root(box) else None
    if unpack is not None:
        res = _git(box, f"{unpack}; {_look_command(bundle)}", made=True)
        if res.exit_code != NO_UNPACK:
            return Applied(res.exit_code, res.output, unpacks=True)
    box.copy_tree_in("/", tar_of(_harness_files(bundle)))
    res = _git(box, _look_command(bundle))
    return Applied(res.exit_code, res.output)


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
    unpacks: bool = False  # `prepare` sent the harness inside its command (the box unpacks at its root, has tar)


def joined(look: Applied, applied: Applied) -> Applied:
    """The first look (`prepare`) and `apply_and_list`'s command, each run apart in the same grade sandbox, as
    `look_and_apply`'s one command would have said them: a look that failed is the answer (20: the runner
    cannot start; 19: tests.patch's paths could not be listed)."""
    if look.exit_code != 0:
        return Applied(20 if look.exit_code == 20 else 19, look.output)
    return Applied(applied.exit_code, look.output + applied.output)


def _looked(applied: Applied, name: str, bundle: TaskBundle) -> FirstLook:
    """The first look from what `look_and_apply`'s command said."""
    if applied.exit_code == 20:
        raise TestRunError("the test runner cannot start in the task image", output=applied.output)
    lines = applied.output.split("\n")
    if applied.exit_code == 21 and len(lines) >= LOOK_LINES + 1:
        raise PatchError(name, _unb64(lines[LOOK_LINES])[-1000:].strip() or "git apply failed")
    if applied.exit_code != 0 or len(lines) != LOOK_LINES + 3:
        raise PatchError("tests", f"git could not list the submission's paths (exit {applied.exit_code})")
    prepared = _prepared(lines[:LOOK_LINES], bundle)
    tokens = _split_z(_unb64(lines[LOOK_LINES]))
    changed = {tokens[i + 1]: tokens[i][0] for i in range(0, len(tokens) - 1, 2)}
    tracked = set(_split_z(_unb64(lines[LOOK_LINES + 1])))
    packages = package_dirs(tracked)
    base_files = (tracked - {p for p, s in changed.items() if s == "A"}) | {p for p, s in changed.items() if s == "D"}
    return FirstLook(prepared.manifest, changed, prepared.tests_paths, packages,
                     frozenset(prepared.image_names - repo_names(base_files)), prepared.plugins,
                     prepared.sources, prepared.based, prepared.selectors)


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
    return _looked(taken, name, bundle)


def _pytest_config_changed(box: Sandbox, base: str):
    def changed(path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        now = box.read_file(f"{WORKDIR}/{path}")
        old = _git(box, f"{GIT} show {shlex.quote(f'{base}:{path}')}")
        before = old.output if old.exit_code == 0 else None
        after = now.decode("utf-8", "replace") if now is not None else None
        return pytest_section(name, before) != pytest_section(name, after)
    return changed


def reset_steps(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, look: FirstLook) -> tuple[list[Reset], str]:
    """The resets to do, and the shell steps doing them, then applying tests.patch and removing it from the box,
    for the hidden tests' run to take first (`grading.run_tests`: as root in the repository, with git's
    pristine environment; exit RESET_FAILED or TESTS_PATCH_FAILED). The lists of paths travel in the steps
    (a copy in when they are large); a changed pytest config is read here (an exec each)."""
    task = bundle.task
    hidden = look.tests_paths | set(task.test.files)
    resets = plan_resets(look.changed, lambda p: profile.is_test_path(p) or p in hidden, look.packages,
                         _pytest_config_changed(box, task.base_commit), look.installed)
    restore = [r.path for r in resets if r.existed]
    delete = [r.path for r in resets if not r.existed]
    steps = []
    lists = {f"{IN_BOX}/{k}.lst": "\0".join(v).encode("utf-8", "surrogateescape")
             for k, v in {"restore": restore, "delete": delete}.items() if v}
    if sum(len(data) for data in lists.values()) > INLINE_LISTS:
        box.copy_tree_in("/", tar_of({path[1:]: data for path, data in lists.items()}))
    else:
        steps += [f"{{ printf %s {base64.b64encode(data).decode()} | base64 -d > {path} || exit {RESET_FAILED}; }}"
                  for path, data in lists.items()]
    # the submission's new paths go first: one may stand where base has a folder to restore (a test folder the
    # submission made a file: restored first, the folder replaced the file, and `rm -f` of it failed: red team
    # 14a, R14a-1); none is a path base has, so none is under what is restored
    if delete:
        steps.append(f"{{ xargs -0 -r rm -f -- < {IN_BOX}/delete.lst || exit {RESET_FAILED}; }}")
    if restore:
        steps.append(f"{{ {GIT} checkout {shlex.quote(task.base_commit)} --pathspec-from-file={IN_BOX}/restore.lst "
                     f"--pathspec-file-nul || exit {RESET_FAILED}; }}")
    if bundle.tests_patch.strip():
        steps.append(f"{{ {apply_command(f'{IN_BOX}/tests.patch')} 2>{IN_BOX}/apply.err "
                     f"|| {{ cat {IN_BOX}/apply.err; exit {TESTS_PATCH_FAILED}; }}; }}")
    steps.append(FORGET_TESTS)
    return resets, "; ".join(steps)


def plan_of(bundle: TaskBundle, sources: dict[str, str], based: dict[str, str], name: str,
            seed: int | None, selectors: dict[str, str],
            repository: Mapping[str, frozenset[Decimal]] | None = None,
            real_at: twins.RealAt | None = None) -> twins.GradingPlan:
    """The grading plan for a submission graded as `name`, from the hidden files after tests.patch (`sources`)
    and at base (`based`): reference submissions (validation) get candidate twins once the graded tests are
    known; a candidate's grading, the recorded ones. `selectors`: the conftests and pytest configuration files
    the names keep clear of (`twins.grading_plan`). `repository`: what the repository's other test files write,
    which validation's candidate values keep balanced against (`TaskInputs.repository`). `real_at`: where
    validation's extreme orders put each graded test in its group (`twins.grading_plan`; candidates only)."""
    task = bundle.task
    return twins.grading_plan(task, sources, seed, candidates=name != "candidate" and bool(task.FAIL_TO_PASS),
                              base=based, instruction=bundle.instruction, selectors=selectors, repository=repository,
                              real_at=real_at)


def _planted(plan: twins.GradingPlan) -> dict[str, bytes]:
    return {f: text.encode("utf-8") for f, text in plan.texts.items()}


def _plugins(profile: RepoProfile, image_plugins: list[str]) -> list[str]:
    return list(dict.fromkeys([*profile.pytest_plugins, *image_plugins]))


@dataclass
class Staging:
    """A grading made ready for a trial's grade sandbox while its candidate worked (`stage`): the plan (its map
    stays here), the first run's config, nonce and planted files as one tar (`tar`), and the plugins it names.
    `unpack`: the step that puts the tar in the box inside the diff's exec (None: it goes by a copy before the
    first run); `placed`: it is in the box."""

    plan: twins.GradingPlan
    run: Staged
    plugins: list[str]
    tar: bytes
    unpack: str | None = None
    placed: bool = False


def stage(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, look: Applied, name: str,
          seed: int | None, repository: Mapping[str, frozenset[Decimal]] | None = None,
          real_at: twins.RealAt | None = None) -> Staging | None:
    """The grading plan made from the first look's hidden files (`prepare`'s, in this box) and its first run
    staged (`grading.staging`), before anything of the submission is in the box: none of it depends on the
    submission. Nothing goes into the box here: a trial unpacks the tar in the exec that diffs its candidate's
    tree (`Staging.unpack`, when the box unpacks at its root: that exec ends before any code of the submission
    runs, so no process is left whose command line holds the nonce), else `verify` copies it. None when the
    look failed (the verifier says why)."""
    lines = look.output.split("\n")
    if look.exit_code != 0 or len(lines) != LOOK_LINES + 1:
        return None
    try:
        prepared = _prepared(lines[:LOOK_LINES], bundle)
    except (PatchError, TestRunError):
        return None
    plan = plan_of(bundle, prepared.sources, prepared.based, name, seed,
                   with_plugin_modules(box, bundle, prepared.selectors), repository, real_at)
    plugins = _plugins(profile, prepared.plugins)
    run, tar = staging(bundle.task, box.test_user, plugins, _planted(plan))
    return Staging(plan, run, plugins, tar, unpack_command(tar, NO_UNPACK) if look.unpacks else None)


def verify(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, patch: str, name: str, runs: int,
           seed: int | None = None, taken: Applied | None = None, staged: Staging | None = None,
           repository: Mapping[str, frozenset[Decimal]] | None = None, real_at: twins.RealAt | None = None) -> Graded:
    """Grade `patch` in `box` (a fresh grade sandbox). Raises PatchError and TestRunError, which carry the
    scan's flags (`flags`): a patch that does not apply or a runner that dies keeps them for the reviewer.
    `seed`: the grading plan's (None: fresh; validation passes one so both states get the same twin candidates).
    `taken`: the first look's command already ran in `box` (`look_and_apply`), the patch applied.
    `staged`: the plan made and the first run staged in `box` already (`stage`, a trial's).
    `repository`, `real_at`: validation's, for its candidate twins (`plan_of`)."""
    flags = scan(patch)  # the patch's own text: known before anything runs
    try:
        return _verify(box, bundle, profile, patch, name, runs, flags, seed, taken, staged, repository, real_at)
    except (PatchError, TestRunError) as exc:
        exc.flags = sorted(set(flags))
        raise


def _verify(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, patch: str, name: str, runs: int,
            flags: list[str], seed: int | None, taken: Applied | None, staged: Staging | None,
            repository: Mapping[str, frozenset[Decimal]] | None = None,
            real_at: twins.RealAt | None = None) -> Graded:
    task = bundle.task
    look = first_look(box, bundle, patch, name, taken)
    resets, before = reset_steps(box, bundle, profile, look)
    flags += [f"reset: {r.describe()}" for r in resets if r.suspicious]
    plugins = _plugins(profile, look.plugins)
    first: Staged | None
    if staged is not None and staged.plugins == plugins:
        if not staged.placed:
            box.copy_tree_in("/", staged.tar)
        plan, planted, first = staged.plan, {}, staged.run
    else:
        selectors = with_plugin_modules(box, bundle, look.selectors)
        plan, first = plan_of(bundle, look.sources, look.based, name, seed, selectors, repository, real_at), None
        planted = _planted(plan)
    results = []
    for _ in range(runs):
        # the first run takes the resets and tests.patch, and moves the planted files into place, in its exec
        run = run_tests(box, task, task.resources.test_timeout_s, look.manifest, plugins, planted, before, first)
        planted, before, first = {}, "", None
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
