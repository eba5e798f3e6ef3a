"""The grading plan an export ships: `twins.grading_plan`'s output, cut into what the box plants per run.

`sweserve run` plants the hidden tests, their mutation twins (`Task.twins`, kept by validation) and plain
canaries under fresh random names, shuffled (evaluation/twins.py). An exported task is graded by the root
verifier inside its image (harness/sweserve_verify.py), which can run nothing of sweserve's: so the exporter
runs `grading_plan` here, once, and ships its output in the form harness/sweserve_plan.py plants. Each member
(graded test, twin, canary) goes as the text `grading_plan` wrote for it, its name cut out, so whatever a
mutation operator did to a twin ships unchanged; the text around the members stays as written; the box
shuffles each group and draws every name afresh at run time. `ship` checks that the cut, put back together
with the names and order `grading_plan` drew, is its output byte for byte.

The plan is made from the hidden files as the box has them before planting: base + tests.patch, read from
the task's clone (`hidden_sources`), beside the repository's conftest.py and pytest configuration files as the
box runs them (`plan_sources`): what they read in a name is shipped per file (`checks`), and the box's draw
keeps planted names clear of it as `sweserve run` does (sweserve_twins.draw_name).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from sweserve import pyast
from sweserve.dataset.interface import repository_states
from sweserve.errors import SweserveError
from sweserve.evaluation import twins
from sweserve.harness import sweserve_plan
from sweserve.harness import sweserve_twins as canaries
from sweserve.models import TaskBundle

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class PlanCutError(SweserveError):
    """grading_plan's output does not have the shape the exports' planter puts back together."""


def hidden_sources(clone: Path, bundle: TaskBundle) -> dict[str, str]:
    """Each hidden test file (as `task.test.files` names it) -> its text at base + tests.patch: what the box
    reads before planting, as `sweserve run`'s grade sandbox reads it (Python files with text only)."""
    return plan_sources(clone, bundle)[0]


def plan_sources(clone: Path, bundle: TaskBundle) -> tuple[dict[str, str], dict[str, str]]:
    """(`hidden_sources`, the selector files: each conftest.py and pytest configuration file on the way to the
    hidden files, and the plugin modules they load, that exist at base + tests.patch -> its text, as `sweserve
    run` reads them in the box: `twins.grading_plan`'s `selectors`)."""
    task = bundle.task
    with repository_states(clone, task, bundle.oracle_patch, bundle.tests_patch) as (before, _):
        texts = {f: before.git.blob(before.files[f]) for f in task.test.files if f in before.files}
        def read_many(paths: list[str]) -> dict[str, str]:
            return {p: before.git.blob(before.files[p]) for p in paths if p in before.files}

        selectors = canaries.with_plugins(read_many(canaries.selector_paths(task.test.files, task.test.workdir)),
                                          list(task.test.files), task.test.workdir, read_many,
                                          task.test.env.get("PYTEST_ADDOPTS", ""))
    return {f: t for f, t in texts.items() if f.endswith(".py") and t.strip()}, selectors


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _node(tree: ast.Module, cls: str | None, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    scopes = [tree.body] if cls is None else [n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    found = [n for body in scopes for n in body if isinstance(n, _DEFS) and n.name == name]
    if len(found) != 1:
        raise PlanCutError(f"planted test {cls}.{name} is not defined once in its scope")
    return found[0]


def _start(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1


def _cut(text: str, members: list[tuple[int, twins.Member]]) -> tuple[dict, dict[int, str]]:
    """(the file's shape: chunks and slots, {member index: its text with the name at NAME})."""
    lines = _lines(text)
    tree = pyast.parse_module(text)
    spans: list[tuple[int, int, int]] = []
    keys: dict[int, tuple[str | None, str]] = {}
    blocks: dict[int, str] = {}
    for index, m in members:
        node = _node(tree, m.cls, m.name)
        start, end = _start(node), node.end_lineno or node.lineno
        spans.append((start, end, index))
        chunk = lines[start:end]
        at = node.lineno - 1 - start
        chunk[at], n = twins.rename_def(chunk[at], m.name, sweserve_plan.NAME)
        if n != 1:
            raise PlanCutError(f"planted test {m.name}: its def line does not name it")
        blocks[index] = "".join(chunk)
    slots: list[tuple[int, int, str, list[int]]] = []  # one per graded test's group, one per scope's canaries
    of = dict(members)
    for start, end, index in sorted(spans):
        m = of[index]
        key = (m.cls, "~canary" if m.kind == "canary" else m.real)
        last = slots[-1] if slots else None
        if last is not None and keys[last[3][-1]] == key:
            gap = "".join(lines[last[1]:start])
            if gap.strip() or (len(last[3]) > 1 and gap != last[2]):
                raise PlanCutError("the planted members of one group are not side by side")
            slots[-1] = (last[0], end, gap, last[3] + [index])
        else:
            slots.append((start, end, "\n", [index]))
        keys[index] = key
    chunks, at = [], 0
    for start, end, _, _ in slots:
        if start < at:
            raise PlanCutError("two scopes' planted tests overlap")
        chunks.append("".join(lines[at:start]))
        at = end
    chunks.append("".join(lines[at:]))
    shape = {"chunks": chunks, "slots": [{"gap": gap, "members": order} for _, _, gap, order in slots]}
    return shape, blocks


def ship(bundle: TaskBundle, sources: dict[str, str], seed: int | None = None,
         selectors: dict[str, str] | None = None) -> str:
    """The plan file an export ships (JSON, for sweserve_plan.plant): made by `twins.grading_plan` from the
    hidden files' texts (`sources`, see `hidden_sources`), the repository's selector files (`selectors`, see
    `plan_sources`) and the task's recorded twins."""
    task = bundle.task
    plan = twins.grading_plan(task, sources, seed, instruction=bundle.instruction, selectors=selectors)
    taken: set[str] = set()
    words: dict[str, list[str]] = {}
    checks: dict[str, list[str]] = {}
    for file, text in sources.items():
        try:
            tree = pyast.parse_module(text)
        except (SyntaxError, ValueError):
            continue
        taken |= {n.name for n in ast.walk(tree) if isinstance(n, _DEFS)}
        checks[file] = twins.name_checks(task, selectors, file, sources)
        words[file] = twins.name_words(tree, task.test.runner, checks[file])
    own = {(m.file, m.name): i for i, m in enumerate(plan.members) if not m.alias}
    members = [{"file": m.file, "cls": m.cls, "kind": m.kind, "real": m.real, "must_pass": m.must_pass,
                "twin": m.twin.model_dump_json() if m.twin else None, "unread": m.unread,
                "alias_of": own[(m.file, m.name)] if m.alias else None} for m in plan.members]
    files = {}
    for file, text in sorted(plan.texts.items()):
        mine = [(i, m) for i, m in enumerate(plan.members) if m.file == file and not m.alias]
        shape, blocks = _cut(text, mine)
        for i, block in blocks.items():
            members[i]["block"] = block
        back = shape["chunks"][0] + "".join(
            slot["gap"].join(blocks[i].replace(sweserve_plan.NAME, plan.members[i].name) for i in slot["members"])
            + chunk for slot, chunk in zip(shape["slots"], shape["chunks"][1:]))
        if back != text:
            raise PlanCutError(f"{file}: the cut plan does not put grading_plan's text back together")
        files[file] = {**shape, "words": words[file], "checks": checks[file]}
    if any("block" not in m and m["alias_of"] is None for m in members):
        raise PlanCutError("a planted member is in no file grading_plan wrote")
    return json.dumps({"version": sweserve_plan.VERSION, "files": files, "members": members,
                       "taken": sorted(taken)}, sort_keys=True)
