"""Validation's signal checks: controls beyond the null submission, each a reason a valid task is not ready.

- structure_only — the structure-only control (`dataset/signals.structure_patch`) graded through the same
  verifier as any submission; it fires when it passes every FAIL_TO_PASS test;
- relax_only_tests — tests.patch only loosens existing tests (`dataset/signals.relax_only`);
- cosmetic_oracle — the oracle only changes comments, docstrings, logging or formatting
  (`dataset/signals.cosmetic`, files read from the clone at base and merge commits).

Accelerator-only tests keep their own handling (`needs_accelerator`, a rejection).
"""

from __future__ import annotations

from collections.abc import Callable

from sweserve.dataset.gitio import Git, GitError
from sweserve.dataset.signals import cosmetic, relax_only, structure_patch
from sweserve.evaluation.context import Context
from sweserve.evaluation.grading import PatchError, TestRunError
from sweserve.evaluation.trial import grade_submission
from sweserve.models import SignalCheck, TaskBundle

STRUCTURE = "structure"  # the control's name in logs and in the verifier (never "candidate")


def structure_check(ctx: Context, bundle: TaskBundle, image: str, gpu_ids: list[str], f2p: list[str],
                    save_log: Callable[[str, str], object]) -> SignalCheck:
    patch = structure_patch(bundle.oracle_patch)
    if not patch.strip():
        return SignalCheck(name="structure_only", detail="the oracle renames, copies, deletes and adds no file")
    save_log(f"{STRUCTURE}.patch", patch)
    try:
        graded = grade_submission(ctx, bundle, image, patch, gpu_ids, runs=1, name=STRUCTURE)
    except PatchError as exc:
        return SignalCheck(name="structure_only", ran=False, detail=f"the control does not apply: {str(exc)[:200]}")
    except TestRunError as exc:
        save_log(f"{STRUCTURE}-1.log", exc.output)
        return SignalCheck(name="structure_only", detail=f"the hidden tests did not run on it: {exc.reason}")
    (run,) = graded.runs
    save_log(f"{STRUCTURE}-1.log", run.output)
    passing = [t for t in f2p if run.outcomes.get(t) == "passed"]
    if f2p and len(passing) == len(f2p):
        return SignalCheck(name="structure_only", fired=True, detail=(
            f"the oracle's renames, deletions and new files cut to their imports pass all {len(f2p)} "
            "FAIL_TO_PASS tests: they check layout, not behaviour"))
    return SignalCheck(name="structure_only", detail=f"the control passes {len(passing)} of {len(f2p)} "
                       "FAIL_TO_PASS tests")


def static_checks(ctx: Context, bundle: TaskBundle) -> list[SignalCheck]:
    """The checks read from the patches (and, for the oracle's files, the clone)."""
    task = bundle.task
    why = relax_only(bundle.tests_patch)
    checks = [SignalCheck(name="relax_only_tests", fired=why is not None, detail=why or "")]
    clone = ctx.clone_for(task.repo)
    if clone is None:
        checks.append(SignalCheck(name="cosmetic_oracle", ran=False, detail="no clone known to read the files from"))
        return checks
    try:
        with Git(clone) as g:
            why = cosmetic(bundle.oracle_patch, lambda p: g.read(task.base_commit, p),
                           lambda p: g.read(task.merge_commit, p))
    except GitError as exc:
        checks.append(SignalCheck(name="cosmetic_oracle", ran=False, detail=f"the clone cannot be read: {exc}"))
        return checks
    checks.append(SignalCheck(name="cosmetic_oracle", fired=why is not None, detail=why or ""))
    return checks


def signal_checks(ctx: Context, bundle: TaskBundle, image: str, gpu_ids: list[str], f2p: list[str],
                  save_log: Callable[[str, str], object]) -> list[SignalCheck]:
    """Every signal check of a valid task, the cheap ones first."""
    return static_checks(ctx, bundle) + [structure_check(ctx, bundle, image, gpu_ids, f2p, save_log)]
