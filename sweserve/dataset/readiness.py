"""Readiness: whether a demanding reviewer would keep a task, read from what validation and lint recorded.

A task is **ready** when all of these hold, and otherwise carries one reason per check that failed:

- **valid** — validation kept it (FAIL_TO_PASS found, oracle passes, null fails);
- **lint** — `sweserve tasks lint` ran on it (its quality record has an interface reading) and found nothing;
- **family** — the family is settled: set by hand (`family_override`), or the classifier's recorded verdict
  (`family_confident`: the top family score at least the profile's `family_min_score`, ahead of the next by
  `family_min_margin`) is confident;
- **signals** — validation's signal checks (`evaluation/signals.py`) ran and none fired;
- **guarded** — a forger cannot pass it cheaply: code the candidate adds to a module the tests import can
  report any test as passed, and only mutation twins make it guess which member is real. Validation records
  the odds that such code passes every FAIL_TO_PASS test by guessing (`forge_odds`, `evaluation/guard.py`:
  1 when no test keeps a twin no prior reads) and the profile's bound (`max_forge_odds`, 0.25 by default:
  one such group of four); the odds must be measured and within the bound, and any twin groups kept by a
  validation that ran each graded test first and last of its group (`twin_orders`; `groups_one_order` when not);
- **review** — no blind review recorded (`Task.reviews`, `sweserve tasks review`), or most reviewers judged
  it GOOD: a task at least half of its reviewers judge BAD is not ready (`review:bad`; a tie drops it).

Nothing here reads a clone or runs a container: it is a function of task.json alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from sweserve.dataset.taskstore import TEXT_FILES, load_task, save_task
from sweserve.models import TWIN_ORDERS, Readiness, ReadinessReason, Task


def family_verdict(task: Task) -> tuple[bool, str, str]:
    """(confident, which recorded field decided, why not) for the task's family: the classifier's verdict
    (`family_confident`, from the profile's family_min_score and family_min_margin), or a hand-set override."""
    if task.family_override is not None:
        return True, "family_override", ""
    if task.family_confident is None:
        return False, "family_confident", "no family verdict recorded (mine the task again, or `tasks lint --write`)"
    if not task.family_confident:
        ranked = sorted(task.family_scores.items(), key=lambda kv: -kv[1])
        scores = ", ".join(f"{family} {score:.2f}" for family, score in ranked[:2]) or "no signal"
        return False, "family_confident", (f"the classifier is not confident of {task.family} ({scores}: the top "
                                           "score is low, close to the next, or no changed line lies under the "
                                           "family's paths)")
    return True, "family_confident", ""


_FINDING_KINDS = (  # a lint finding's opening words -> its readiness key (lint:<kind>); others are lint:findings
    ("statement names hidden tests", "leak"), ("statement repeats", "leak"),
    ("statement prescribes the change", "recipe"), ("statement maps the fix", "fix_map"),
    ("statement's title prescribes the fix", "fix_title"), ("unfair:", "unfair"),
    ("tests need new names", "vocabulary"), ("statement is the PR title only", "statement"),
    ("statement has ", "statement"), ("statement stops mid-sentence", "truncated"),
    ("statement leaves open", "open_question"), ("tests pin exact numbers", "private_numbers"),
    ("scope larger than the statement", "oversize_scope"), ("tests reach changed code", "unstated"), ("the clone cannot read", "clone"),
    ("interface not computed", "clone"), ("new vocabulary not checked", "clone"),
)


def finding_kind(finding: str) -> str:
    """The named reason of a lint finding (the funnel counts drops by it)."""
    return next((kind for opening, kind in _FINDING_KINDS if finding.startswith(opening)), "findings")


def assess(task: Task, instruction: str | None = None) -> Readiness:
    """The task's readiness now, from its records; with `instruction` (what the candidate reads now), forge odds
    measured with another instruction are stale (`stale_odds`)."""
    reasons: list[ReadinessReason] = []
    v = task.validation
    if v is None:
        reasons.append(ReadinessReason(kind="not_validated", key="not_validated",
                                       detail="not validated: run `sweserve validate`"))
    elif not task.validated:
        category = v.category or ("no_fail_to_pass" if v.status == "valid" else "other")
        reasons.append(ReadinessReason(kind="rejected", key=f"rejected:{category}",
                                       detail=f"validation rejected it: {v.reason or category}"))
    q = task.quality
    if q is None or q.interface_from is None and not q.findings:
        reasons.append(ReadinessReason(kind="lint", key="lint:not_run", detail="lint has not run: `sweserve tasks "
                                       "lint --write` (validate runs it when the clone is known)"))
    elif q.findings:
        by_kind: dict[str, list[str]] = {}
        for f in q.findings:
            by_kind.setdefault(finding_kind(f), []).append(f)
        for kind, found in by_kind.items():
            reasons.append(ReadinessReason(kind="lint", key=f"lint:{kind}", detail=f"lint: {found[0]}"
                                           + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")))
    confident, family_from, why = family_verdict(task)
    if not confident:
        reasons.append(ReadinessReason(kind="family_unsure", key="family_unsure",
                                       detail=f"family not settled: {why}; set family_override to settle it"))
    signals_ok = True
    if task.validated:
        if v is None or v.signals is None:
            signals_ok = False
            reasons.append(ReadinessReason(kind="signal", key="signal:not_run",
                                           detail="signal checks have not run: validate it again"))
        else:
            for check in v.signals:
                if check.fired:
                    signals_ok = False
                    reasons.append(ReadinessReason(kind="signal", key=f"signal:{check.name}",
                                                   detail=f"{check.name}: {check.detail}"))
    stale = instruction is not None and stale_odds(task, instruction)
    guard_ok = task.validated and guarded(task) and not stale
    if task.validated and not guard_ok:
        reasons.append(ReadinessReason(kind="guard", key="unguarded", detail=_unguarded(task) if not stale else (
            "forge odds measured with another instruction (its numbers are what a forger reads): "
            "`sweserve tasks guard --write` measures them again")))
    if task.validated and v is not None and task.twins and set(v.twin_orders) != set(TWIN_ORDERS):
        guard_ok = False  # its groups were kept from one drawn order: one may hold a test that is not idempotent
        reasons.append(ReadinessReason(kind="guard", key="groups_one_order", detail=(
            "twin groups kept from one drawn order of the oracle's run (validated before each graded test ran "
            "first and then last of its group): a test that is not idempotent may fail honest solutions at "
            "grading; validate it again")))
    if (bad := review_verdict(task)) is not None and bad:
        reasons.append(ReadinessReason(kind="review", key="review:bad", detail=bad))
    checks = {"valid": task.validated, "lint": not any(r.kind == "lint" for r in reasons), "family": confident,
              "signals": task.validated and signals_ok, "guarded": guard_ok}
    if task.reviews:
        checks["reviewed_good"] = not bad
    return Readiness(ready=not reasons, reasons=reasons, checks=checks, family_from=family_from)


def review_verdict(task: Task) -> str | None:
    """None when no review is recorded; "" when most reviewers judged the task GOOD; else why it is dropped (at
    least half judged it BAD: precision first, a tie drops it). A reviewer's latest verdict counts; a reviewer is
    their name up to case and spaces (`Review.who`), and only reviews of this task count (R23f-2, R23f-4)."""
    latest = {r.who: r for r in sorted(task.reviews, key=lambda r: r.at) if r.task == task.task_id}
    if not latest:
        return None
    bad = [r for r in latest.values() if r.verdict == "BAD"]
    if 2 * len(bad) < len(latest):
        return ""
    return f"blind review: BAD ({len(bad)} of {len(latest)} reviewers): {bad[0].reason or 'no reason given'}"


def guarded(task: Task) -> bool:
    """Whether validation measured the task's forge odds (`ValidationRecord.forge_odds`) within its profile's
    bound (`max_forge_odds`, as validation read it)."""
    v = task.validation
    if v is None or v.forge_odds is None:
        return False
    return v.forge_odds <= (v.max_forge_odds if v.max_forge_odds is not None else DEFAULT_MAX_FORGE_ODDS) + 1e-9


GUARD_RULES = "18"  # the guard's rules (evaluation/guard.py, the priors twins.visible reads): odds measured under
# other rules are stale like odds measured with another instruction. 5: red team 5's priors (the whole base file,
# spelled numbers, derived values, the repository's other test files). 6: red team 7's (every text file, every
# spelling of a number, values derived from the file's numbers beside the test, tests pinned by name). 7: values
# derived from the instruction's numbers and scaled by unit constants, digits in names and paths, gzip'd files,
# unreadable files beside the tests (red team 8), tests pinned by validation (`Task.pinned`), whole classes planted.
# 8: a strong site's twins share the real value's shape (`twins.value_shape`: R8-1), so a round value is weak.
# 9: with the profile's `history: "ancestors"`, every file version and commit message of base's ancestry (R8-7).
# 10: one step of arithmetic between a test's numbers and the repository code's (`twins.Crossing`, R8-4), and
# with the numbers other hidden files write (R9-5); which of the test's numbers a value divides (R9-9); a number
# the forger reads next to the value (R9-6, R9-7); pairs past MAX_DERIVED by membership (R9-1). 11: every decimal
# site is weak (`twins.computed`: R9-2, red team 10). 12: a strong site's twins share the real value's power of 3
# too (`twins.SHAPE_PRIMES`: R9-3). 13: every member is written by exactly the repository files that write the
# real value (`twins.Written`: R11-6, a bet on how many files, or which, write a member). 14: a Python file
# `tokenize` gives up on is read as plain text, not as writing nothing (R22d-1); the digits of the hidden files'
# own paths are read (R22d-2), and what tests.patch's other files write (`guard.patched_numbers`, R22d-3); a
# UTF-16/32 text with its byte-order mark is text (`guard.decoded`, R22d-4).
# 15: a file's counts of a member are read exactly, past 8 too (`twins.repeated`, R22h-1); the digits of every
# path base's history held are read, a blob shared with another path's too (R22h-2).
# 16: a binary blob away from the hidden files is read as `strings` and a UTF-16 decode without its mark read it
# (`guard.binary_text`, R22j-1); a zip, bz2 or xz blob is read unpacked (`guard.unpacked`, R22j-2).
# 17: a tar blob is read unpacked, and an archive inside an archive too, down to `guard.MAX_LAYERS` (R23d-1); the
# ancestors' author and committer names and e-mails beside their messages (R23d-2); numbers spelled in words in
# every file and message, as in the instruction (`twins.spelled_counts`, R23d-3).
# 18: escapes decoded (`\u0036`, `&#54;`: `twins.unescaped`, R23p-1); a `.pyc`'s marshal'd constants
# (`guard.marshalled`, R23p-2); words read across markup and a comment wrapped over lines (R23p-3), and in
# identifiers and paths (`SIX_HUNDRED_THIRTEEN`, `SixHundredThirteen`: R23p-5).


def instruction_digest(instruction: str) -> str:
    """What a task records of the instruction its forge odds were measured with (`forge_odds_instruction`),
    and of the guard's rules they were measured under (`GUARD_RULES`)."""
    return hashlib.sha256(f"guard {GUARD_RULES}\0{instruction}".encode()).hexdigest()


def stale_odds(task: Task, instruction: str) -> bool:
    """Whether the task's recorded forge odds were measured with another instruction than `instruction` (an
    interface section written after validation, a statement mined again, an edit by hand), or under other
    rules of the guard (`GUARD_RULES`): the numbers an instruction writes are what a forger reads beside the
    files (`twins.visible`), so the odds may not hold."""
    v = task.validation
    return v is not None and v.forge_odds is not None and v.forge_odds_instruction != instruction_digest(instruction)


DEFAULT_MAX_FORGE_ODDS = 0.25  # the profile default (`RepoProfile.max_forge_odds`), for a record without the bound


def _unguarded(task: Task) -> str:
    v = task.validation
    if v is None or v.forge_odds is None:
        return "forge odds not measured (validated before they were, or no clone): validate it again"
    bound = v.max_forge_odds if v.max_forge_odds is not None else DEFAULT_MAX_FORGE_ODDS
    return (f"unguarded: code in a module the tests import passes every FAIL_TO_PASS test by guessing with odds "
            f"{v.forge_odds:.2f}, over the profile's max_forge_odds {bound:.2f} (no FAIL_TO_PASS test keeps enough "
            "twins no prior reads)")


def cannot_be_ready(task: Task) -> list[str]:
    """Why the task can never be ready, whatever validation finds: what mining already recorded against it.
    The statement is not eligible (title only, under the profile's minimum, or it leaks: `statement_blockers`),
    or the family is not settled (no override, and the classifier not confident). Empty when validation could
    make it ready; `validate --ready-eligible` spends no container on the others."""
    why = []
    q = task.quality
    if q is not None and not q.statement_eligible:
        why.append("statement: " + (q.statement_blockers[0] if q.statement_blockers else "not eligible"))
    confident, _, unsure = family_verdict(task)
    if not confident:
        why.append(f"family_unsure: {unsure}")
    return why


def record(task_dir: Path) -> Task:
    """Assess the task in task_dir and save its readiness in task.json."""
    task = load_task(task_dir)
    text = task_dir / TEXT_FILES["instruction"]
    task.readiness = assess(task, text.read_text(encoding="utf-8") if text.is_file() else None)
    save_task(task_dir, task)
    return task


def why_not_ready(task: Task, instruction: str) -> str | None:
    """Why `run`, `export` and `report` leave the task out now, or None when they take it: it must be recorded
    ready (`readiness` in task.json) and still be ready assessed now with `instruction`, so a stale record never
    lets a task through."""
    if not task.ready:
        if task.readiness and task.readiness.reasons:
            return task.readiness.reasons[0].detail
        return "not validated" if not task.validated else ("readiness never assessed (sweserve validate, or "
                                                           "sweserve tasks funnel --write)")
    now = assess(task, instruction)
    if not now.ready:
        return f"{now.reasons[0].detail} (assessed now; `sweserve tasks funnel --write` records it)"
    return None


def is_ready(task: Task) -> bool:
    """What `run`, `export` and `report` select by default: readiness recorded as ready, and still valid."""
    return task.ready
