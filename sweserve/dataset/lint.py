"""Lint: can an honest engineer solve this task from its instruction alone?

One task at a time, from its folder and the clone it was mined from (read with git, never checked out):

- **interface** — the names its FAIL_TO_PASS tests (every test of tests.patch before validation) need
  that base_commit lacks and the oracle adds (``interface.py``), written into instruction.md as a
  "## New interfaces" section when ``write`` is set;
- **leaks** — the statement repeats oracle or test lines, or names hidden tests (``leaks.py``);
- **unfair** — a FAIL_TO_PASS test needs a name that is not at base and that the instruction (statement
  and section) never mentions;
- **vocabulary** — fail-closed companion of unfair, on words instead of resolved names (``vocabulary.py``):
  an identifier, flag or environment variable the added test lines use, that the oracle adds, that base
  lacks (one ``git grep``) and the tests do not define, must be mentioned in the instruction;
- **gaps** — what the tests pin that the statement leaves open or cut (``gaps.py``): a statement that stops
  mid-sentence, asks what the tests decide, tests pinning exact numbers of private names the instruction never
  gives, or many FAIL_TO_PASS tests for a short problem;
- **statement** — where it came from and how long it is: too short fails;
- **family** — what the profile's signals say now (per-family scores, confident or not), with the task's
  override winning (and settling it);
- **clone** — a file lint must read that the clone cannot (a missing or corrupt object), with git's message:
  the task fails, since lint cannot vouch for it, but is not rejected for it, and the other tasks go on.
  Where the states cannot be built at all the instruction keeps the section it has.

The outcome is a ``QualityRecord`` (saved in task.json with ``write``); ``findings`` lists what fails.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from pydantic import BaseModel

from sweserve.config_search import ConfigSearch
from sweserve.dataset import gaps
from sweserve.dataset.interface import (
    InterfaceReport,
    Unreadable,
    compute_interface,
    repository_states,
    statement_of,
    with_interface,
)
from sweserve.dataset.leaks import leak_findings
from sweserve.dataset.patches import split_sections
from sweserve.dataset.profiles import Classification, load_profile
from sweserve.dataset.readiness import assess
from sweserve.dataset.statement import heading_fix
from sweserve.dataset.taskstore import TEXT_FILES, load_bundle, save_task
from sweserve.dataset.vocabulary import VocabularyUnchecked, new_vocabulary
from sweserve.dataset.vocabulary import finding as vocabulary_finding
from sweserve.models import Family, QualityRecord, StatementSource, TaskBundle

MIN_STATEMENT_CHARS = 150  # a title and one sentence; anything shorter leaves the change to be guessed
NOTE_PREFIX = "lint: "  # lint's own notes, replaced on each run; others (mining's) are kept


class FileLines(BaseModel):
    path: str
    added: int = 0
    deleted: int = 0


class LintReport(BaseModel):
    task_id: str
    family: Family
    family_confidence: float | None = None
    family_scores: dict[str, float] = {}
    family_confident: bool = False
    classification: Classification | None = None
    quality: QualityRecord
    instruction: str  # as it is (or is now, with write)
    written: bool = False
    rejected: bool = False
    clone_findings: list[str] = []  # the part of quality.findings about the clone, not the task

    @property
    def task_findings(self) -> list[str]:
        return [f for f in self.quality.findings if f not in self.clone_findings]

    @property
    def passed(self) -> bool:
        return self.quality.passed


def changed_lines(patch: str) -> list[FileLines]:
    """Added and deleted lines per file of a git patch (the new path of a rename)."""
    files = []
    for section in split_sections(patch):
        path, added, deleted, in_hunk = None, 0, 0, False
        for line in section.splitlines():
            if not in_hunk:
                if line.startswith("+++ ") and line[4:].strip() != "/dev/null":
                    path = line[4:].split("\t")[0].strip().removeprefix("b/")
                elif line.startswith("--- ") and path is None and line[4:].strip() != "/dev/null":
                    path = line[4:].split("\t")[0].strip().removeprefix("a/")
                elif line.startswith("@@"):
                    in_hunk = True
                continue
            if line.startswith("+"):
                added += 1
            elif line.startswith("-"):
                deleted += 1
        if path is None:  # binary or mode-only: `diff --git a/X b/X`
            path = section.split("\n", 1)[0].rsplit(" b/", 1)[-1]
        files.append(FileLines(path=path, added=added, deleted=deleted))
    return files


def mentioned(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def statement_findings(statement: str, source: str, min_chars: int = MIN_STATEMENT_CHARS) -> list[str]:
    body = statement.strip()
    if source == "title_only" or len(body) < min_chars:
        what = "is the PR title only" if source == "title_only" else f"has {len(body)} characters"
        return [f"statement {what} (source {source}; at least {min_chars} characters wanted)"]
    return []


def _source(bundle: TaskBundle) -> StatementSource:
    if bundle.task.quality is not None:
        return bundle.task.quality.statement_source
    body = statement_of(bundle.instruction).strip().split("\n", 1)
    return "pr_description" if len(body) > 1 and body[1].strip() else "title_only"


def clone_findings(interface: InterfaceReport) -> list[str]:
    if not interface.unreadable:
        return []
    (where, why), more = next(iter(interface.unreadable.items())), len(interface.unreadable) - 1
    count = len(interface.unreadable)
    return [f"the clone cannot read {count} file{'s' if count > 1 else ''} lint reads: {where}: {why}"
            + (f" (and {more} more)" if more else "") + "; names there are not judged"]


def gap_findings(statement: str, instruction: str, tests_patch: str, fail_to_pass: list[str],
                 oracle_patch: str = "") -> list[str]:
    """What the tests pin that the statement leaves open or cut (``gaps.py``), read from the problem part: the
    statement without its Requirements section."""
    problem = re.split(r"\n## Requirements\s*\n", statement, maxsplit=1)[0]
    files = {t.split("::", 1)[0] for t in fail_to_pass} or None
    found = [gaps.truncated_finding(problem), gaps.open_question_finding(problem, tests_patch),
             gaps.private_numbers_finding(tests_patch, instruction, files),
             gaps.oversize_finding(problem, fail_to_pass),
             gaps.unstated_behaviour_finding(oracle_patch, tests_patch, instruction, files) if oracle_patch else None]
    return [f for f in found if f]


def lint_bundle(bundle: TaskBundle, repo_path: Path, write: bool = False,
                search: ConfigSearch | None = None) -> LintReport:
    """The quality record of a task; with write, the instruction it should have (section regenerated).
    search: where the task's profile is looked up by name (default: the current project's)."""
    task = bundle.task
    computed = True
    vocabulary: list[str] = []
    try:
        with repository_states(repo_path, task, bundle.oracle_patch, bundle.tests_patch) as (before, after):
            interface = compute_interface(before, after, task, bundle.tests_patch)
            broken = clone_findings(interface)
            instruction = with_interface(bundle.instruction, interface.items) if write else bundle.instruction
            try:
                vocabulary = new_vocabulary(repo_path, task.base_commit, bundle.oracle_patch, bundle.tests_patch,
                                            instruction, after.parse, task.FAIL_TO_PASS,
                                            lambda path, top: after.module_path(top, [posixpath.dirname(path)])
                                            is not None)
            except VocabularyUnchecked as exc:  # fail closed: a clone finding, like a file lint cannot read
                broken.append(f"new vocabulary not checked: {exc}")
            statement = statement_of(instruction)
            # the fix map names methods by the base files' lines (a hunk's header names only the class)
            leaks = leak_findings(statement, bundle.oracle_patch, bundle.tests_patch,
                                  lambda path, line: gaps.enclosing_def(before.parse(path), line))
    except Unreadable as exc:
        computed, interface, broken = False, InterfaceReport(), [f"interface not computed: {exc}"]
        instruction = bundle.instruction
        statement = statement_of(instruction)
        leaks = leak_findings(statement, bundle.oracle_patch, bundle.tests_patch)
    source = _source(bundle)
    unfair = {}
    unknown: set[str] = set()
    for test_id, needs in interface.needs.items():
        # a name nobody defines (made at run time, or never there) is no fault of the instruction: only what the
        # oracle visibly adds or changes must be announced
        missing = [n.name for n in needs if n.status != "unknown" and not mentioned(n.word, instruction)]
        unknown.update(n.name for n in needs if n.status == "unknown")
        if missing:
            unfair[test_id] = missing
    if (why := heading_fix(statement, bundle.oracle_patch)):  # mined before titles were judged (`title_fix`)
        leaks.append(f"statement's title prescribes the fix ({why}): re-mine, or rewrite the statement")
    findings = list(leaks)
    findings += [f"unfair: {t} needs {', '.join(f'`{n}`' for n in names[:4])}"
                 + (f" and {len(names) - 4} more" if len(names) > 4 else "")
                 + " (not at base, not in the instruction)" for t, names in unfair.items()]
    if vocabulary:
        findings.append(vocabulary_finding(vocabulary))
    findings += gap_findings(statement, instruction, bundle.tests_patch, task.FAIL_TO_PASS, bundle.oracle_patch)
    profile = load_profile(task.profile, search)
    findings += statement_findings(statement, source, profile.min_statement_chars)
    findings += broken
    notes = []
    if unknown:
        names = sorted(unknown)
        notes.append(f"tests use {len(names)} name{'s' if len(names) > 1 else ''} neither base nor the oracle visibly "
                     f"defines (not judged unfair): " + ", ".join(f"`{n}`" for n in names[:4])
                     + (f" and {len(names) - 4} more" if len(names) > 4 else ""))
    if interface.not_found:
        notes.append(f"{len(interface.not_found)} FAIL_TO_PASS tests not found in the test files, "
                     f"e.g. {interface.not_found[0]}")
    if computed and not write and with_interface(bundle.instruction, interface.items) != bundle.instruction:
        notes.append("instruction.md lacks the current 'New interfaces' section (lint --write adds it)")
    labels = task.quality.labels if task.quality else []
    classification = profile.classification(task.title, changed_lines(bundle.oracle_patch), task.pr_number,
                                            tests=task.test.files, labels=labels)
    family = task.family_override or classification.family or task.family
    confident = task.family_override is not None or classification.confident
    if family != task.family:
        notes.append(f"family: recorded {task.family}, now {family}"
                     + (" (override)" if task.family_override else f" ({classification.source})"))
    confidence = classification.scores.get(family, 0.0) if family else 0.0
    if not confident:
        ranked = ", ".join(f"{f} {v:.2f}" for f, v in list(classification.scores.items())[:3]) or "no signal"
        notes.append(f"family not confident ({ranked}): set family_override in task.json to settle it")
    previous = task.quality or QualityRecord(statement_source=source)  # mining's fields are kept
    kept = [n for n in previous.notes if not n.startswith(NOTE_PREFIX)]
    quality = previous.model_copy(update=dict(
        statement_chars=len(statement.strip()), notes=kept + [NOTE_PREFIX + n for n in notes],
        leaks=leaks, unfair=unfair, vocabulary=vocabulary, findings=findings,
        **(dict(interface_from=interface.source, interface=interface.items) if computed else {}),
    ))
    return LintReport(task_id=task.task_id, family=family, family_confidence=confidence,
                      family_scores=classification.scores, family_confident=confident,
                      classification=classification, quality=quality, instruction=instruction,
                      clone_findings=broken)


def lint_task(task_dir: Path, repo_path: Path, write: bool = False, reject: bool = False,
              search: ConfigSearch | None = None) -> LintReport:
    """Lint one task folder. write: regenerate the section and record quality and family in task.json.
    reject: a validated task that fails lint for itself (not for what its clone cannot read) is marked
    rejected (reason 'lint: …')."""
    bundle = load_bundle(task_dir)
    report = lint_bundle(bundle, repo_path, write=write, search=search)
    task = bundle.task
    if write:
        if report.instruction != bundle.instruction:
            (task_dir / TEXT_FILES["instruction"]).write_text(report.instruction, encoding="utf-8")
        task.quality = report.quality
        task.family, task.family_confidence = report.family, report.family_confidence
        task.family_scores, task.family_confident = report.family_scores, report.family_confident
        report.written = True
    if reject and report.task_findings and task.validation is not None and task.validation.status == "valid":
        task.validation.status = "rejected"
        task.validation.reason = f"lint: {report.task_findings[0]}"
        task.validation.category = "lint"
        report.rejected = True
    if report.written or report.rejected:
        if task.readiness is not None or task.validation is not None:  # what lint found changes readiness
            task.readiness = assess(task, report.instruction if write else bundle.instruction)
        save_task(task_dir, task)
    return report
