"""The exports grade with mutation twins: `twins.grading_plan`'s output, shipped (evaluation/export_plan.py) and
planted by the in-box root verifier under names and an order it draws at run time (harness/sweserve_plan.py).

The first tests run on this machine: the shipped plan plants what `grading_plan` plants, under fresh names
each run; the box reads outcomes back as the host does; a twin made by any other operator ships unchanged.
The Docker tests run the real swebench harness and the real Harbor on the demo's distributed task, validated
so that it keeps twins: the oracle scores 1, and two in-process forgeries that beat the plain canaries the
exports shipped before (shown by the same export with its plan taken out) score 0.
"""

from __future__ import annotations

import ast
import json
import random
import re

import pytest
from test_attacks_twins import F2P, FILE, HIDDEN, _task

from sweserve.evaluation import export_plan, twins
from sweserve.harness import sweserve_plan
from sweserve.models import TaskBundle, Twin

UNEVEN = f"{FILE}::test_uneven_split_covers_everything"
MEAN = f"{FILE}::test_mean_is_not_shifted"


def _bundle() -> TaskBundle:
    task = _task(FAIL_TO_PASS=sorted(F2P), PASS_TO_PASS=[f"{FILE}::test_even_split",
                                                         f"{FILE}::TestScale::test_scale_doubles"],
                 twins=[*(Twin(test=UNEVEN, site=1, value=v) for v in ("4", "5", "7")),
                        *(Twin(test=MEAN, site=0, value=v) for v in ("2.4", "2.6", "2.7"))])
    return TaskBundle(task=task, instruction="Fix uneven shard ranges.", oracle_patch="", tests_patch="")


def _defs(text: str) -> dict[str, str]:
    """Each test function's text with its own name masked, by name."""
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out[node.name] = (ast.get_source_segment(text, node) or "").replace(node.name, "NAME", 1)
    return out


def test_the_shipped_plan_plants_what_grading_plan_plants_under_names_drawn_each_run():
    bundle = _bundle()
    shipped = export_plan.ship(bundle, {FILE: HIDDEN}, seed=5)
    reference = twins.grading_plan(bundle.task, {FILE: HIDDEN}, seed=5)
    runs = [sweserve_plan.plant(json.loads(shipped)) for _ in range(2)]
    for texts, members in runs:
        planted = _defs(texts[FILE])
        assert sorted(planted.values()) == sorted(_defs(reference.texts[FILE]).values())  # the same members
        assert {m["name"] for m in members} <= set(planted) and len(members) == len(reference.members)
        assert sum(m["kind"] == "twin" for m in members) == 6
    (_, one), (_, two) = runs
    assert not {m["name"] for m in one} & {m["name"] for m in two}  # names drawn per run, not at export
    # nothing in the shipped file names a planted member: no name is fixed at export time
    for m in reference.members:
        assert m.name not in shipped
    # the order of a scope is drawn per run too: over a few runs, the real uneven-split test moves
    places = set()
    for _ in range(12):
        texts, members = sweserve_plan.plant(json.loads(shipped))
        names = [n for n in re.findall(r"def (test_\w+)", texts[FILE])]
        real = next(m["name"] for m in members if m["kind"] == "test" and m["real"] == UNEVEN.split("::")[-1])
        places.add(names.index(real))
    assert len(places) > 2, places


def test_fresh_names_are_drawn_from_the_hosts_distribution():
    words = ["even", "split", "uneven", "covers", "everything"]
    for seed in range(200):
        assert sweserve_plan.fresh_name(random.Random(seed), words, set()) == \
            twins._fresh_name(random.Random(seed), words, set())


def test_the_box_reads_outcomes_back_as_the_host_does():
    """Random outcomes for the planted ids: the box's reading (real outcomes, problems) is the host's
    `GradingPlan.read` on the same members and names."""
    bundle = _bundle()
    shipped = export_plan.ship(bundle, {FILE: HIDDEN})
    rng = random.Random(11)
    for _ in range(300):
        texts, members = sweserve_plan.plant(json.loads(shipped), rng)
        host = twins.GradingPlan(members=[twins.Member(
            m["file"], m["cls"], m["name"], m["kind"], m["real"],
            Twin.model_validate_json(m["twin"]) if m["twin"] else None, m["must_pass"]) for m in members])
        outcomes = {}
        for m in members:
            if rng.random() < 0.9:
                planted = "::".join([m["file"], *([m["cls"]] if m["cls"] else []), m["name"]])
                outcomes[planted] = rng.choice(["passed", "passed", "failed", "skipped", "error"])
        if rng.random() < 0.3:
            outcomes[f"{FILE}::test_stray"] = "passed"
        exit_status = rng.choice([0, 1, None])
        real, problems = sweserve_plan.read(members, outcomes, exit_status)
        reading = host.read(outcomes, exit_status=exit_status)
        assert (real, problems) == (reading.outcomes, reading.problems), (outcomes, exit_status)


def test_a_twin_made_by_another_operator_ships_unchanged(monkeypatch):
    """The shipped plan is each member's text as grading_plan wrote it: a new mutation operator on the host
    (here: every twin's `==` turned into `>=`, its literal kept) needs nothing of the box."""
    original = twins.grading_plan

    def other_operator(task, sources, seed=None, **kw):
        plan = original(task, sources, seed, **kw)
        for file, text in plan.texts.items():
            for m in plan.members:
                if m.kind == "twin":
                    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)
                                and n.name == m.name)
                    segment = ast.get_source_segment(text, node) or ""
                    text = text.replace(segment, segment.replace(" == ", " >= "))
            plan.texts[file] = text
        return plan
    monkeypatch.setattr(twins, "grading_plan", other_operator)
    bundle = _bundle()
    texts, members = sweserve_plan.plant(json.loads(export_plan.ship(bundle, {FILE: HIDDEN})))
    planted = _defs(texts[FILE])
    for m in members:
        assert (" >= " in planted[m["name"]]) == (m["kind"] == "twin" and "==" in HIDDEN), m


def test_a_damaged_plan_is_refused():
    shipped = json.loads(export_plan.ship(_bundle(), {FILE: HIDDEN}))
    for damage in ({"version": 0}, {"members": shipped["members"][1:]}):
        with pytest.raises(sweserve_plan.PlanError):
            sweserve_plan.plant({**shipped, **damage})
