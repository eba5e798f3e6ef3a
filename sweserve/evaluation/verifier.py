"""The verifier: one grade sandbox (no network, fresh from the task image) from submission to outcomes.

    harness in (and a digest of pytest's files, before anything else)
      → submission applied with `git apply --index` (git names every path it touched)
      → resets (`resets.py`): test paths, foreign conftests, pytest config, start-up hooks, package
        metadata and shadowing modules back to base
      → tests.patch applied → canaries added (`canaries.py`) → hidden tests run `runs` times
        (`grading.run_tests`: isolated interpreter, outcomes streamed behind a nonce)

A submission is also scanned (`tamper_scan.py`); flags and resets travel in `Graded`, the caller decides
what they mean (`tampered` for canaries, and for flags when the profile says so).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from sweserve.agents.base import IN_BOX
from sweserve.dataset.profiles import RepoProfile
from sweserve.environment.sandbox import WORKDIR, Sandbox
from sweserve.environment.transfer import put_tree, tar_of
from sweserve.evaluation import canaries as canary_tests
from sweserve.evaluation.grading import PatchError, TestRun, apply_patch, install_harness, run_tests
from sweserve.evaluation.resets import MAYBE_PYTEST_CONFIG, Reset, plan_resets, pytest_section
from sweserve.evaluation.submission import GIT, PRISTINE_GIT_ENV
from sweserve.evaluation.tamper_scan import scan
from sweserve.models import TaskBundle

SEP = "\0@@sweserve@@\0"
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

    @property
    def dropped(self) -> list[str]:
        return [r.path for r in self.resets]


def _git(box: Sandbox, command: str, timeout: float = 120):
    return box.exec(f"exec 2>{IN_BOX}/git.err; {command}", timeout, env=PRISTINE_GIT_ENV)


def _split_z(raw: str) -> list[str]:
    return [p for p in raw.split("\0") if p]


def _numstat_paths(raw: str) -> set[str]:
    """Paths in `git apply --numstat -z` output (a rename lists both names after an empty path field)."""
    paths, tokens, i = set(), raw.split("\0"), 0
    while i < len(tokens):
        token = tokens[i]
        if token.count("\t") >= 2:
            path = token.split("\t", 2)[2]
            if path:
                paths.add(path)
            else:
                paths.update(t for t in tokens[i + 1:i + 3] if t)
                i += 2
        i += 1
    return paths


def touched(box: Sandbox, base: str, has_tests_patch: bool) -> tuple[dict[str, str], set[str], set[str]]:
    """What the applied submission changed ({path: A/M/D/T}), the paths tests.patch touches, and packages."""
    numstat = f"{GIT} apply --numstat -z {IN_BOX}/tests.patch" if has_tests_patch else "true"
    res = _git(box, f"{GIT} diff --cached --name-status -z --no-renames {shlex.quote(base)} && printf '{SEP_PRINTF}' && "
                    f"{numstat} && printf '{SEP_PRINTF}' && {GIT} ls-files -z")
    if res.exit_code != 0 or res.output.count(SEP) != 2:
        raise PatchError("tests", f"git could not list the submission's paths (exit {res.exit_code})")
    names, numstat_out, files = res.output.split(SEP)
    tokens = _split_z(names)
    changed = {tokens[i + 1]: tokens[i][0] for i in range(0, len(tokens) - 1, 2)}
    packages = {f.rsplit("/", 1)[0] if "/" in f else "" for f in _split_z(files)
                if f == "__init__.py" or f.endswith("/__init__.py")}
    return changed, _numstat_paths(numstat_out), packages


def _pytest_config_changed(box: Sandbox, base: str):
    def changed(path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        now = box.read_file(f"{WORKDIR}/{path}")
        old = _git(box, f"{GIT} show {shlex.quote(f'{base}:{path}')}")
        before = old.output if old.exit_code == 0 else None
        after = now.decode("utf-8", "replace") if now is not None else None
        return pytest_section(name, before) != pytest_section(name, after)
    return changed


def reset_to_base(box: Sandbox, bundle: TaskBundle, profile: RepoProfile) -> list[Reset]:
    task = bundle.task
    changed, tests_paths, packages = touched(box, task.base_commit, bool(bundle.tests_patch.strip()))
    hidden = tests_paths | set(task.test.files)
    resets = plan_resets(changed, lambda p: profile.is_test_path(p) or p in hidden, packages,
                         _pytest_config_changed(box, task.base_commit))
    if not resets:
        return []
    restore = [r.path for r in resets if r.existed]
    delete = [r.path for r in resets if not r.existed]
    put_tree(box, IN_BOX, tar_of({"restore.lst": "\0".join(restore).encode("utf-8", "surrogateescape"),
                                  "delete.lst": "\0".join(delete).encode("utf-8", "surrogateescape")}))
    steps = ["true"]
    if restore:
        steps.append(f"{GIT} checkout {shlex.quote(task.base_commit)} "
                     f"--pathspec-from-file={IN_BOX}/restore.lst --pathspec-file-nul")
    if delete:
        steps.append(f"xargs -0 -r rm -f -- < {IN_BOX}/delete.lst")
    res = _git(box, " && ".join(steps))
    if res.exit_code != 0:
        raise PatchError("tests", f"could not reset the submission's test files (exit {res.exit_code})")
    return resets


def add_canaries(box: Sandbox, bundle: TaskBundle) -> list[canary_tests.Canary]:
    task = bundle.task
    sources = {}
    for file in task.test.files:
        raw = box.read_file(f"{WORKDIR}/{file}")
        if raw is not None and file.endswith(".py"):
            sources[file] = raw.decode("utf-8", "replace")
    plan = canary_tests.plan(task, sources)
    if plan.texts:
        put_tree(box, WORKDIR, tar_of({f: (sources[f] + text).encode() for f, text in plan.texts.items()}))
    return plan.canaries


def verify(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, patch: str, name: str, runs: int) -> Graded:
    """Grade `patch` in `box` (a fresh grade sandbox). Raises PatchError and TestRunError."""
    task = bundle.task
    manifest = install_harness(box)
    apply_patch(box, patch, name, index=True)
    if bundle.tests_patch.strip():
        box.put_file(f"{IN_BOX}/tests.patch", bundle.tests_patch.encode("utf-8"))
    resets = reset_to_base(box, bundle, profile)
    apply_patch(box, bundle.tests_patch, "tests")
    planted = add_canaries(box, bundle)
    results = []
    for _ in range(runs):
        run = run_tests(box, task, task.resources.test_timeout_s, manifest, profile.pytest_plugins)
        run.outcomes, problems = canary_tests.check(planted, run.outcomes)
        for mapping in (run.skips, run.messages):
            for test_id in [t for t in mapping if t not in run.outcomes]:
                del mapping[test_id]
        run.tampered = sorted(set(run.tampered) | set(problems))
        results.append(run)
    flags = scan(patch) + [f"reset: {r.describe()}" for r in resets if r.suspicious]
    return Graded(results, resets, sorted(set(flags)))
