"""A grading plan made on the host and planted in the box by the exports' root verifier (sweserve_verify.py).

`sweserve run` grades with `evaluation/twins.py`'s `grading_plan`: every graded test, its mutation twins (chosen
by execution at validation) and plain canaries under fresh random names, shuffled, the map kept on the host. An
export cannot run that module in the box (it is the host's: pydantic, the task model), so the exporter
(`evaluation/export_plan.py`) runs `grading_plan` once and cuts its output into what is fixed and what must be
drawn per run:

- per hidden file, the text around the planted tests (`chunks`) and a `slot` per graded test's group (where
  the file had the test) and per scope's canaries, with the blank lines between two of its members (`gap`);
- per member (a graded test, a twin, a canary), its text exactly as `grading_plan` wrote it, the name at `NAME`,
  and what it stands for (`kind`, `real`, `twin`, `must_pass`);
- per file, the words its names are drawn from and the strings the repository's own name-based selection
  reads (`checks`: sweserve_twins.selector_checks, read by the exporter); the names no member may take (`taken`: every function of
  the hidden files).

A member's text is whatever `grading_plan` made: a twin made by any mutation operator, now or later, plants
here unchanged. At run time (`plant`), this root process shuffles each slot's members and draws every name
afresh, with its rank token (`sweserve_twins.Ranks`: the distribution and order `grading_plan` draws with), so
two runs of one export differ, and nothing fixed at export time says which is which. The map from names back
to real ids stays in this process's memory; the plan file is deleted once read. `read` maps a run's outcomes back, as the host's
`GradingPlan.read` does (tests/test_export_twins.py checks that they agree): a twin that passed, a twin not
failed while its test passed, a canary that went the wrong way, or an exit status of 0 beside a failed twin
is forgery, and a real test that passed beside a passing twin is failed.

Standard library only: the box imports this file as it is.
"""

import random
import re

try:  # in the box this folder is on sys.path (sweserve_verify.py); on the host it is the package sweserve.harness
    import sweserve_twins
except ImportError:
    from sweserve.harness import sweserve_twins

NAME = "\0"  # where a member's name goes in its text: no Python source holds a NUL
VERSION = 1
_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3, "missing": 4}


class PlanError(Exception):
    """A shipped plan that cannot be planted: a damaged or foreign export."""


def plant(plan, rng=None):
    """(texts {file: planted text}, members [dict, each with its drawn `name`]) for one run."""
    if not isinstance(plan, dict) or plan.get("version") != VERSION:
        raise PlanError("the shipped grading plan is not one this verifier reads")
    try:
        return _plant(plan, rng or random.SystemRandom())
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise PlanError("the shipped grading plan is damaged") from None


def _plant(plan, rng):
    members = [dict(m) for m in plan["members"]]
    texts = {}
    for file, shape in sorted(plan["files"].items()):
        taken = set(plan["taken"])  # per file, as grading_plan draws them
        chunks, slots = shape["chunks"], shape["slots"]
        if len(chunks) != len(slots) + 1:
            raise PlanError(f"the shipped grading plan of {file} is damaged")
        orders = []
        for slot in slots:
            order = list(slot["members"])
            rng.shuffle(order)
            for i in order:
                if members[i]["file"] != file or members[i]["block"].count(NAME) != 1:
                    raise PlanError(f"the shipped grading plan of {file} is damaged")
            orders.append(order)
        flat = [i for order in orders for i in order]
        reals = [members[i]["real"] if members[i]["kind"] != "canary" else None for i in flat]
        ranks = sweserve_twins.Ranks(sum(real is not None for real in reals))
        for k in sweserve_twins.ranked(reals):  # named in rank order, as grading_plan names them (`_rank`)
            members[flat[k]]["name"] = ranks.draw(rng, shape["words"], taken, shape.get("checks", ()), reals[k])
        out = [chunks[0]]
        for slot, order, chunk in zip(slots, orders, chunks[1:]):
            out += [slot["gap"].join(members[i]["block"].replace(NAME, members[i]["name"]) for i in order), chunk]
        texts[file] = "".join(out)
    for m in members:  # a class that inherits a planted test runs it under the name drawn for its scope's copy
        if m.get("alias_of") is not None:
            m["name"] = members[m["alias_of"]]["name"]
    if any("name" not in m for m in members):
        raise PlanError("the shipped grading plan has a member in no slot")
    return texts, members


def _base_id(test_id):
    at = test_id.find("[")  # one pass: a regex search for the parameters was quadratic in the id
    return test_id[:at] if at >= 0 and test_id.endswith("]") else test_id


def _same_path(a, b):
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _worst(mapping, key, outcome):
    if key not in mapping or _SEVERITY.get(outcome, 4) > _SEVERITY.get(mapping[key], 4):
        mapping[key] = outcome


def read(members, outcomes, exit_status=None):
    """(outcomes by real id, without twins and canaries; what was forged), from outcomes by planted id."""
    by_file: dict = {}
    by_name: dict = {}  # a planted name is unique in its file (a subclass inherits it)
    for i, m in enumerate(members):
        by_file.setdefault(m["file"], {})[(m["cls"], m["name"])] = i
        if m.get("alias_of") is None:
            by_name.setdefault(m["file"], {})[m["name"]] = i
    planted_reals = {(m["file"], m["cls"], m["real"]) for m in members if m["kind"] == "test"}
    real: dict = {}
    seen: dict = {}
    ids_of: dict = {}  # a planted test's index -> the real ids its outcomes were read as
    files_ran = set()
    forged_names = False
    passed = set()  # must-fail members with a passing report
    for test_id, outcome in outcomes.items():
        parts = _base_id(test_id).split("::")  # a parameter may hold '::' (an IPv6 '::1'): split without it
        params = test_id[len(_base_id(test_id)):]
        name = parts[-1]
        cls = parts[1] if len(parts) == 3 else None
        file = _file_of(parts[0], by_file) if len(parts) > 1 else None
        index = by_file[file].get((cls, name)) if file else None
        if index is None and file:  # a planted member a subclass inherits
            index = by_name[file].get(name)
        if file:
            files_ran.add(file)
        if index is not None and members[index].get("unread"):
            continue  # a mixin's copy (no runner collects it) or a twin its class never checked: nothing
        if index is None and (file, cls, name) in planted_reals:
            forged_names = True  # the real name of a test planted under another: never a pass
            continue
        if index is None:
            _worst(real, test_id, outcome)
            continue
        _worst(seen, index, outcome)
        m = members[index]
        if outcome == "passed" and (m["kind"] == "twin" or (m["kind"] == "canary" and not m["must_pass"])):
            passed.add(index)
        if m["kind"] == "test":
            real_id = "::".join([parts[0], *parts[1:-1], m["real"]]) + params
            ids_of.setdefault(index, set()).add(real_id)
            _worst(real, real_id, outcome)
    for index in passed:  # a must-fail member passed under any id is passed (`GradingPlan.read`)
        seen[index] = "passed"
    problems = _problems(members, seen, ids_of, files_ran, real, exit_status)
    if forged_names:
        problems = sorted({*problems, "an outcome names a hidden test planted under another name"})
    return real, problems


def _file_of(path, files):
    if path in files:
        return path
    return max((f for f in files if _same_path(path, f)), key=len, default=None)


def _problems(members, seen, ids_of, files_ran, real, exit_status):
    problems = []
    tests = {(m["file"], m["cls"], m["real"]): i for i, m in enumerate(members) if m["kind"] == "test"}
    failed_must_fail = inconclusive = False
    for i, m in enumerate(members):
        outcome = seen.get(i, "missing")
        if m.get("unread"):
            continue
        if m["kind"] == "canary":
            if outcome == "missing" and m["file"] in files_ran:
                problems.append("a canary test is missing from the outcomes")
            elif m["must_pass"] and outcome == "failed":
                problems.append("a must-pass canary test failed")
            elif not m["must_pass"] and outcome == "passed":
                problems.append("a must-fail canary test passed")
            elif outcome in ("skipped", "error") and any(
                    o == "passed" and members[j]["file"] == m["file"] and members[j]["cls"] == m["cls"]
                    for j, o in seen.items() if members[j]["kind"] != "canary"):
                inconclusive = True  # it never reached its check: no evidence of forging, and no test passes
            failed_must_fail |= not m["must_pass"] and outcome == "failed"
        elif m["kind"] == "twin":
            test = tests.get((m["file"], m["cls"], m["real"]))
            test_outcome = seen.get(test, "missing") if test is not None else "missing"
            # the test's own outcomes: read from its planted name, in its class or a subclass that inherits it
            mine = sorted(ids_of.get(test, set())) if test is not None else []
            if outcome == "passed" and any(real[t] == "passed" for t in mine):
                problems.append("a twin of a hidden test passed beside its test")
                for test_id in mine:
                    real[test_id] = "failed"  # a pass beside a passing twin is no pass
            elif outcome == "passed":
                pass  # a wrong value equal to a twin's (or a forger's wrong guess): its test failed, no more
            elif outcome in ("skipped", "error") and test_outcome == "passed":
                for test_id in mine:  # it never reached its check: no evidence of forging, and no pass beside it
                    real[test_id] = "failed"
            elif outcome != "failed" and test_outcome == "passed":
                problems.append("a twin of a hidden test was missing while its test passed")
            failed_must_fail |= outcome == "failed"
    if inconclusive:
        for test_id in {t for ids in ids_of.values() for t in ids}:
            real[test_id] = "failed"
    if exit_status == 0 and failed_must_fail:
        problems.append("the test runner exited 0 although a twin or must-fail canary failed")
    return sorted(set(problems))


def unmask(members, text):
    """Output with each drawn name replaced by what it stands for (shown only after the verdict)."""
    names = {m["name"]: m["real"] if m["kind"] == "test" else f"{m['real']}~twin" if m["kind"] == "twin"
             else "canary" for m in members if m.get("name")}
    if not names or not text:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    return pattern.sub(lambda found: names[found.group(1)], text)
